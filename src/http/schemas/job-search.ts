import { Type } from 'typebox';
import { IDEMPOTENCY_KEY_MAX, MAX_BATCH, UNIQUE_KEY_MAX } from '../../jobs/limits.js';
import { BULK_ACTIONS, BULK_OUTCOMES } from '../../service/bulk.js';
import { GroupName, Int32, JobId, Nullable, PrintableText, QueueName, strict, Timestamp } from './common.js';
import { JobState } from './jobs.js';
import { ref } from './ref.js';

/** Longest error text GET /v1/jobs looks for. */
export const ERROR_SEARCH_MAX = 200;

export const JobSearchQuery = Type.Object(
  {
    state: Type.Optional(
      Type.Unsafe<'failing' | 'dead'>(
        Type.String({
          enum: ['failing', 'dead'],
          description:
            'failing: live jobs whose last attempt failed (waiting for a retry, or running one), newest ' +
            'failure first; dead: dead jobs, newest first. Required unless a key is given.',
        }),
      ),
    ),
    since: Type.Optional(Timestamp('Only jobs that failed (or died) at or after this time.')),
    queue: Type.Optional(QueueName),
    group: Type.Optional(GroupName),
    error: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: ERROR_SEARCH_MAX,
        description: "Only jobs whose last error's message contains this text (ignoring case).",
      }),
    ),
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
    limit: Type.Optional(Int32({ minimum: 1, maximum: 100, default: 25 })),
    cursor: Type.Optional(Type.String({ maxLength: 400, description: 'next_cursor of the previous page.' })),
    include_payload: Type.Optional(
      Type.Boolean({ default: false, description: 'Payloads (and metadata) are left out unless asked for.' }),
    ),
  },
  strict,
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
    ids: Type.Array(JobId, { minItems: 1, maxItems: MAX_BATCH, uniqueItems: true }),
  },
  { ...strict, $id: 'BulkRequest', examples: [{ action: 'redrive', ids: ['42', '43'] }] },
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
    results: Type.Array(ref(BulkResult), { description: 'One per id, in request order.' }),
    done: Int32({ description: 'How many jobs the action was done to.' }),
    failed: Int32({ description: 'How many were not found or in a state the action does not apply to.' }),
  },
  { $id: 'BulkResponse' },
);
