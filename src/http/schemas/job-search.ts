import { Type } from 'typebox';
import {
  BULK_MATCH_MAX,
  IDEMPOTENCY_KEY_MAX,
  LIST_LIMIT_MAX,
  MAX_BATCH,
  UNIQUE_KEY_MAX,
} from '../../jobs/limits.js';
import { BULK_ACTIONS, BULK_OUTCOMES } from '../../service/bulk.js';
import { GroupName, Int32, JobId, Nullable, PrintableText, QueueName, strict, Timestamp } from './common.js';
import { Job, JobState } from './jobs.js';
import { ref } from './ref.js';

/** Longest error text GET /v1/jobs looks for. */
export const ERROR_SEARCH_MAX = 200;

/** Which failure list: the `state` of GET /v1/jobs and of a bulk action's `match`. */
export const FailureList = Type.Unsafe<'failing' | 'dead'>(
  Type.String({
    $id: 'FailureList',
    enum: ['failing', 'dead'],
    description:
      'failing: live jobs whose last attempt failed (waiting for a retry, or running one), newest ' +
      'failure first; dead: dead jobs, newest first.',
  }),
);

/** The filters of the failure lists, shared by GET /v1/jobs and a bulk action's `match`. */
const FailureFilters = {
  since: Type.Optional(Timestamp('Only jobs that failed (or died) at or after this time.')),
  queue: Type.Optional(QueueName),
  group: Type.Optional(GroupName),
  // Printable like every text a request gives: PostgreSQL refuses a NUL in text outright.
  error: Type.Optional(
    PrintableText(
      ERROR_SEARCH_MAX,
      "Only jobs whose last error's message contains this text (ignoring case).",
    ),
  ),
};

export const JobSearchQuery = Type.Object(
  {
    /** Required unless a key is given (checked by the route, which names the field). */
    state: Type.Optional(ref(FailureList)),
    ...FailureFilters,
    unique_key: Type.Optional(
      PrintableText(
        UNIQUE_KEY_MAX,
        'The job holding this unique key now (it waits to run) and any job of the key running now. Not with state.',
      ),
    ),
    idempotency_key: Type.Optional(
      PrintableText(
        IDEMPOTENCY_KEY_MAX,
        'The job this idempotency key created, while the key is kept, whatever its state. Not with state.',
      ),
    ),
    limit: Type.Optional(Int32({ minimum: 1, maximum: LIST_LIMIT_MAX, default: 25 })),
    cursor: Type.Optional(Type.String({ maxLength: 400, description: 'next_cursor of the previous page.' })),
    include_payload: Type.Optional(
      Type.Boolean({ default: false, description: 'Payloads (and metadata) are left out unless asked for.' }),
    ),
    count: Type.Optional(
      Type.Boolean({
        default: false,
        description: `With a state: also count the list's jobs (every page), up to ${BULK_MATCH_MAX.toLocaleString('en')}, in \`total\`.`,
      }),
    ),
  },
  strict,
);

export const JobSearchPage = Type.Object(
  {
    jobs: Type.Array(ref(Job)),
    next_cursor: Nullable(Type.String()),
    total: Type.Optional(
      Int32({
        description: `With count=true: how many jobs the list holds, counted up to ${BULK_MATCH_MAX.toLocaleString('en')}.`,
      }),
    ),
    total_capped: Type.Optional(
      Type.Boolean({
        description: `With count=true: more than ${BULK_MATCH_MAX.toLocaleString('en')} jobs match.`,
      }),
    ),
    counted_at: Type.Optional(
      Timestamp(
        "With count=true: the server's time of the count; as a bulk action's match.until it acts on the jobs counted and on none that failed later.",
      ),
    ),
  },
  { $id: 'JobSearchPage' },
);

export const BulkMatch = Type.Object(
  {
    state: ref(FailureList),
    ...FailureFilters,
    until: Type.Optional(
      Timestamp(
        'Only jobs that failed (or died) at or before this time; by default the time the request arrives. ' +
          "Pass a count's counted_at to act on what was counted.",
      ),
    ),
  },
  {
    ...strict,
    $id: 'BulkMatch',
    description: `Every job of a list of GET /v1/jobs (its state and filters), newest failure first, up to ${BULK_MATCH_MAX.toLocaleString('en')} jobs.`,
  },
);

export const BulkRequest = Type.Object(
  {
    action: Type.Unsafe<(typeof BULK_ACTIONS)[number]>(
      Type.String({
        enum: [...BULK_ACTIONS],
        description:
          'redrive: dead jobs back to ready with fresh attempts; run_now: scheduled jobs (a delay, or a ' +
          "retry's backoff) ready now; cancel: live jobs will not run (a claimed " +
          "one's worker loses its lease); delete: finished jobs (completed, dead, cancelled) are forgotten, " +
          'with the idempotency key that named them.',
      }),
    ),
    ids: Type.Optional(
      Type.Array(JobId, {
        minItems: 1,
        maxItems: MAX_BATCH,
        uniqueItems: true,
        description: 'The jobs to act on. Either ids or match.',
      }),
    ),
    match: Type.Optional(ref(BulkMatch)),
  },
  {
    ...strict,
    $id: 'BulkRequest',
    examples: [
      { action: 'redrive', ids: ['42', '43'] },
      { action: 'redrive', match: { state: 'dead', error: 'SMTP', until: '2026-12-02T10:00:00Z' } },
    ],
  },
);

export const BulkResult = Type.Object(
  {
    id: Type.String(),
    outcome: Type.Unsafe<(typeof BULK_OUTCOMES)[number]>(
      Type.String({
        enum: [...BULK_OUTCOMES],
        description:
          'What happened to this job: the action done (redriven, ready_now, cancelled, deleted), not_found (no such ' +
          'job this key may see), or invalid_state (the action does not apply to the state it is in).',
      }),
    ),
    state: Nullable(ref(JobState)),
    message: Type.Optional(Type.String()),
  },
  { $id: 'BulkResult', description: "One job's result: its outcome and its state afterwards (null: gone)." },
);

export const BulkResponse = Type.Object(
  {
    results: Type.Array(ref(BulkResult), {
      description: 'One per id, in request order; with match, one per job matched, newest failure first.',
    }),
    done: Int32({ description: 'How many jobs the action was done to.' }),
    failed: Int32({ description: 'How many were not found or in a state the action does not apply to.' }),
    more: Type.Boolean({
      description: `With match: more jobs match than the ${BULK_MATCH_MAX.toLocaleString('en')} acted on (send it again). False with ids.`,
    }),
  },
  { $id: 'BulkResponse' },
);
