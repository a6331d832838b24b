import { type Static, Type } from 'typebox';
import { DEAD_REASONS, JOB_STATES } from '../../job-states.js';
import {
  BULK_MATCH_MAX,
  ERRORS_KEPT,
  GRAPH_MAX_JOBS,
  IDEMPOTENCY_KEY_MAX,
  LEASE_MS_MAX,
  LEASE_MS_MIN,
  LIST_LIMIT_MAX,
  MAX_ATTEMPTS_LIMIT,
  MAX_AWAIT_IDS,
  MAX_AWAIT_MS,
  MAX_BATCH,
  MAX_DELAY_MS,
  MAX_PARENTS,
  MAX_WAIT_MS,
  PARENTS_PAGE_MAX,
  PAYLOAD_PREVIEW_CHARS,
  PRIORITY_MAX,
  PRIORITY_MIN,
  TIMEOUT_MS_MAX,
  TIMEOUT_MS_MIN,
  UNIQUE_KEY_MAX,
  WORKER_ID_MAX,
} from '../../jobs/limits.js';
import { TRACEPARENT_PATTERN, TRACESTATE_MAX, TRACESTATE_PATTERN } from '../../jobs/trace-context.js';
import {
  GroupName,
  Int32,
  Int64,
  JobId,
  Json,
  NewGroupName,
  NewQueueName,
  Nullable,
  PrintableText,
  QueueName,
  strict,
  Timestamp,
} from './common.js';
import { ref } from './ref.js';

/**
 * Schemas of jobs: enqueue, claim, read and list. Every request and response body, and every shape
 * used in more than one place, has an $id: it becomes a named component of the API document (see
 * schemas/components.ts), so generated clients get one named type for it instead of anonymous copies.
 */

export const QueueParams = Type.Object({ queue: QueueName }, strict);
/** The queue of a request that may create it (PUT, enqueue with auto-create). */
export const NewQueueParams = Type.Object({ queue: NewQueueName }, strict);

export const JobParams = Type.Object({ id: JobId }, strict);

export const JobState = Type.Unsafe<(typeof JOB_STATES)[number]>(
  Type.String({
    $id: 'JobState',
    enum: [...JOB_STATES],
    description:
      'Live: waiting (for parents, depends_on), scheduled, ready, claimed. Finished: completed, dead, cancelled.',
  }),
);

export const DeadReason = Type.Unsafe<(typeof DEAD_REASONS)[number]>(
  Type.String({ $id: 'DeadReason', enum: [...DEAD_REASONS], description: 'Why a dead job died.' }),
);

export const ParentFailurePolicy = Type.Unsafe<'cancel' | 'run'>(
  Type.String({
    $id: 'ParentFailurePolicy',
    enum: ['cancel', 'run'],
    description:
      'With depends_on: when a parent goes dead, is cancelled or expires, cancel this job (the default; a ' +
      'redrive of the parent brings it back) or run it anyway once the other parents are done (its ' +
      'dependencies then show parents_failed).',
  }),
);

export const EnqueueRequest = Type.Object(
  {
    payload: Json('Any JSON value; handed to the worker as is.'),
    group: Type.Optional(NewGroupName),
    priority: Type.Optional(
      Int32({ minimum: PRIORITY_MIN, maximum: PRIORITY_MAX, default: 0, description: 'Higher runs first.' }),
    ),
    delay_ms: Type.Optional(
      Int64({ minimum: 0, maximum: MAX_DELAY_MS, description: 'Run no earlier than this long from now.' }),
    ),
    run_at: Type.Optional(Timestamp('Run no earlier than this time (RFC 3339). Not with delay_ms.')),
    max_attempts: Type.Optional(
      Int32({
        minimum: 1,
        maximum: MAX_ATTEMPTS_LIMIT,
        description: 'Claims allowed before the job is dead-lettered. Default: the queue setting.',
      }),
    ),
    traceparent: Type.Optional(
      Type.String({
        pattern: TRACEPARENT_PATTERN,
        description:
          'W3C trace context of the producer, handed to every worker that claims the job (docs/workers.md, "Trace ' +
          'context"). Instead of this field, a `traceparent` header may carry it (for a batch: every job ' +
          'without its own).',
        examples: ['00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'],
      }),
    ),
    tracestate: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: TRACESTATE_MAX,
        pattern: TRACESTATE_PATTERN,
        description: 'W3C tracestate, kept with traceparent (only with it).',
      }),
    ),
    idempotency_key: Type.Optional(
      PrintableText(
        IDEMPOTENCY_KEY_MAX,
        'Re-sending the same key to the same queue within the key retention returns the original job ' +
          'and creates nothing.',
      ),
    ),
    timeout_ms: Type.Optional(
      Int32({
        minimum: TIMEOUT_MS_MIN,
        maximum: TIMEOUT_MS_MAX,
        description:
          'Wall-clock budget of one attempt, from its claim: renewals cannot extend the lease past it, and ' +
          'the attempt fails at it (error reason deadline_exceeded). Default: the queue setting (none).',
      }),
    ),
    expires_at: Type.Optional(
      Timestamp(
        'A job not claimed by this time is never handed out; it goes to dead (reason expired). Must be after ' +
          'run_at, and after now (+ delay_ms) by the database clock: a job that could never run is a 400.',
      ),
    ),
    expires_in_ms: Type.Optional(
      Int64({
        minimum: 1,
        maximum: MAX_DELAY_MS,
        description:
          'expires_at as a length from now. Not with expires_at. More than delay_ms, and ending after run_at.',
      }),
    ),
    unique_key: Type.Optional(
      PrintableText(
        UNIQUE_KEY_MAX,
        'At most one waiting (scheduled, ready, or waiting for parents) job per queue and key; free again once ' +
          'that job is claimed.',
      ),
    ),
    on_conflict: Type.Optional(
      Type.Unsafe<'keep' | 'replace'>(
        Type.String({
          enum: ['keep', 'replace'],
          description:
            'Only with unique_key, when a waiting job holds the key: keep (the default) answers it unchanged ' +
            '(200); replace gives it this payload, priority and run_at (debounce).',
        }),
      ),
    ),
    depends_on: Type.Optional(
      Type.Array(
        Type.Union([
          JobId,
          Type.Object(
            {
              item: Int32({
                minimum: 0,
                maximum: MAX_BATCH - 1,
                description: 'The position of an earlier job of the same batch request (0 is the first).',
              }),
            },
            strict,
          ),
        ]),
        {
          minItems: 1,
          maxItems: MAX_PARENTS,
          description:
            'Parents: the job waits (state waiting) until every one has completed. A job id (in a queue the ' +
            'key may use), or, in a batch, {"item": n} for an earlier job of the same request, so a whole ' +
            `graph is enqueued at once and cannot hold a cycle. At most ${MAX_PARENTS} parents; a parent ` +
            'already completed counts as done; one already dead or cancelled applies on_parent_failure at once.',
        },
      ),
    ),
    on_parent_failure: Type.Optional(ref(ParentFailurePolicy)),
  },
  {
    ...strict,
    $id: 'EnqueueRequest',
    examples: [{ payload: { to: 'ada@example.com' }, priority: 5 }],
  },
);
export type EnqueueRequest = Static<typeof EnqueueRequest>;

export const BatchEnqueueRequest = Type.Object(
  { jobs: Type.Array(ref(EnqueueRequest), { minItems: 1, maxItems: MAX_BATCH }) },
  {
    ...strict,
    $id: 'BatchEnqueueRequest',
    examples: [{ jobs: [{ payload: { n: 1 } }, { payload: { n: 2 }, delay_ms: 60000 }] }],
  },
);

/** The producer's trace context, as claims and reads show it. */
const traceFields = {
  traceparent: Nullable(
    Type.String({ description: "The producer's W3C traceparent; null when none was given." }),
  ),
  tracestate: Nullable(
    Type.String({ description: "The producer's W3C tracestate; null when none was given." }),
  ),
};

const JobGroup = Nullable(Type.String({ description: 'The group given at enqueue; null for none.' }));

const enqueuedFields = {
  id: Type.String(),
  queue: Type.String(),
  group: JobGroup,
  state: ref(JobState),
  priority: Int32(),
  run_at: Timestamp('When the job becomes claimable.'),
  attempts: Int32(),
  max_attempts: Int32(),
  idempotency_key: Nullable(Type.String()),
  created_at: Timestamp('When the job was enqueued.'),
  timeout_ms: Nullable(Int32({ description: "The job's own budget per attempt; null: the queue's." })),
  expires_at: Nullable(Timestamp('No attempt starts after this; null: never expires.')),
  unique_key: Nullable(Type.String()),
};

/**
 * An enqueue answered by an existing job (its idempotency or unique key) leaves that job as it is:
 * the request's depends_on is not added to it, and the answer says so rather than let the caller
 * believe the edges exist. Only in an enqueue's answer, never on a job read later.
 */
const dependsOnApplied = Type.Optional(
  Type.Boolean({
    description:
      'Present when the request gave depends_on. true: the job was created and waits for those parents. ' +
      "false: an existing job answered the request (its idempotency or unique key), and this request's " +
      'depends_on was not applied to it: that job keeps the parents it was created with (GET /v1/jobs/{id}/parents).',
  }),
);

// (The state's note goes on the object: the document generator drops keywords beside a $ref.)
export const EnqueuedJob = Type.Object(
  { ...enqueuedFields, depends_on_applied: dependsOnApplied },
  {
    $id: 'EnqueuedJob',
    description:
      'A job as enqueued. A new job is ready when due now and scheduled when run_at is in the future; waiting ' +
      'while a parent (depends_on) has not completed, or cancelled at once when a parent had failed; the ' +
      'original job returned for a repeated idempotency key may be in any state.',
  },
);
export const BatchEnqueuedJob = Type.Object(
  {
    ...enqueuedFields,
    created: Type.Boolean({
      description: 'false when an idempotency key matched an existing job, or a unique key a waiting one.',
    }),
    depends_on_applied: dependsOnApplied,
  },
  { $id: 'BatchEnqueuedJob', description: 'An EnqueuedJob, and whether this request created it.' },
);
export const BatchEnqueueResponse = Type.Object(
  { jobs: Type.Array(ref(BatchEnqueuedJob)) },
  { $id: 'BatchEnqueueResponse' },
);
export const BatchEnqueuedId = Type.Object(
  {
    id: Type.String(),
    created: BatchEnqueuedJob.properties.created,
    depends_on_applied: dependsOnApplied,
  },
  { $id: 'BatchEnqueuedId', description: "A job's id, and whether this request created it." },
);
export const BatchEnqueueIds = Type.Object(
  { jobs: Type.Array(ref(BatchEnqueuedId)) },
  {
    $id: 'BatchEnqueueIds',
    description:
      'The answer to a batch enqueue sent with `Prefer: return=minimal`: ids only, in request order.',
  },
);
export const BatchEnqueueAnswer = Type.Union([ref(BatchEnqueueResponse), ref(BatchEnqueueIds)], {
  $id: 'BatchEnqueueAnswer',
  description: 'BatchEnqueueResponse, or BatchEnqueueIds when the request preferred `return=minimal`.',
});
/** The headers a batch enqueue reads. */
export const BatchEnqueueHeaders = Type.Object({
  prefer: Type.Optional(
    Type.String({
      description:
        "`return=minimal`: answer each job's id and `created` only (BatchEnqueueIds), and say so in " +
        '`Preference-Applied`. Other preferences are ignored (RFC 7240).',
    }),
  ),
});

export const ClaimRequest = Type.Object(
  {
    max_jobs: Type.Optional(Int32({ minimum: 1, maximum: MAX_BATCH, default: 1 })),
    lease_ms: Type.Optional(
      Int32({
        minimum: LEASE_MS_MIN,
        maximum: LEASE_MS_MAX,
        description: 'Lease length. Default: the queue setting.',
      }),
    ),
    wait_ms: Type.Optional(
      Int32({
        minimum: 0,
        maximum: MAX_WAIT_MS,
        default: 0,
        description: 'Long-poll: wait up to this long for a job when none is ready.',
      }),
    ),
    worker_id: Type.Optional(PrintableText(WORKER_ID_MAX, 'Shown on the job.')),
  },
  {
    ...strict,
    $id: 'ClaimRequest',
    examples: [{ max_jobs: 10, lease_ms: 60000, wait_ms: 20000, worker_id: 'worker-1' }],
  },
);
export type ClaimRequest = Static<typeof ClaimRequest>;

export const ClaimedJob = Type.Object(
  {
    id: Type.String(),
    queue: Type.String(),
    group: JobGroup,
    payload: Json('The payload given at enqueue.'),
    priority: Int32(),
    attempt: Int32({ description: '1 on the first claim, 2 on the second, ...' }),
    max_attempts: Int32(),
    lease_token: Type.String({ format: 'uuid', description: 'Present it to renew, ack and nack.' }),
    lease_expires_at: Timestamp('Renew before this or the job returns to the queue.'),
    deadline_at: Nullable(
      Timestamp("When this attempt's budget (timeout_ms) runs out; renewals stop there. null: no budget."),
    ),
    run_at: Timestamp('When the job became due.'),
    created_at: Timestamp('When the job was enqueued.'),
    ...traceFields,
  },
  { $id: 'ClaimedJob' },
);
export const ClaimResponse = Type.Object({ jobs: Type.Array(ref(ClaimedJob)) }, { $id: 'ClaimResponse' });

export const JobError = Type.Object(
  {
    attempt: Int32(),
    at: Timestamp('When the attempt failed.'),
    message: Type.String(),
    details: Type.Optional(Json('As given by the worker.')),
    reason: Type.Optional(
      Type.String({
        description:
          'Set when Baton failed the attempt: lease_expired, deadline_exceeded or expired; or superseded, ' +
          'when the job came back to waiting (a retry, a re-arm, a redrive) while a newer job held its ' +
          'unique_key, and was cancelled in favour of that job.',
      }),
    ),
    superseded_by: Type.Optional(
      Type.String({
        description: 'With reason superseded: the id of the job that holds the unique_key and runs.',
      }),
    ),
    worker_id: Type.Optional(Nullable(Type.String())),
  },
  { $id: 'JobError', description: 'One failed attempt, as its nack (or the lost lease) recorded it.' },
);

export const JobDependencies = Type.Object(
  {
    parents: Int32({ description: 'Parents named in depends_on.' }),
    parents_pending: Int32({ description: 'Parents not finished yet: the job waits while any is.' }),
    parents_failed: Int32({
      description:
        'Parents that went dead, were cancelled or expired. Above 0 on a job that ran: it ran anyway ' +
        '(on_parent_failure run).',
    }),
    on_parent_failure: ref(ParentFailurePolicy),
  },
  {
    $id: 'JobDependencies',
    description: 'Only on GET /v1/jobs/{id} of a job enqueued with depends_on.',
  },
);

export const Job = Type.Object(
  {
    ...enqueuedFields,
    payload: Json('The payload given at enqueue.'),
    claimed_at: Nullable(Timestamp('When the latest claim happened.')),
    lease_expires_at: Nullable(Timestamp('While claimed: when the lease runs out.')),
    deadline_at: Nullable(Timestamp("While claimed with a budget: when the attempt's time is up.")),
    worker_id: Nullable(Type.String({ description: 'worker_id of the latest claim.' })),
    finished_at: Nullable(Timestamp('When the job reached completed, dead or cancelled.')),
    result: Json('What the worker gave at ack (null until then).'),
    last_error: Nullable(ref(JobError)),
    errors: Type.Array(ref(JobError), {
      description: `Failed attempts, oldest first (the last ${ERRORS_KEPT}).`,
    }),
    dead_reason: Nullable(ref(DeadReason)),
    progress: Json(
      "What the job's worker last reported with a renewal (renew's `progress`), or null. Kept when the " +
        'job finishes; a retry keeps it until the next attempt reports; a redrive clears it.',
    ),
    ...traceFields,
    meta: Json(
      'Metadata kept with the job, or null: for a message sent through the SQS endpoint, its message ' +
        'attributes, system attributes and sender (docs/sqs.md). In lists, only with include_payload.',
    ),
    payload_preview: Type.Optional(
      Type.String({
        description:
          "In lists that leave payloads out (no include_payload): the start of the payload's JSON text, at " +
          `most ${PAYLOAD_PREVIEW_CHARS} characters, ending in "…" when cut.`,
      }),
    ),
    dependencies: Type.Optional(ref(JobDependencies)),
  },
  { $id: 'Job' },
);

export const RelatedJobsQuery = Type.Object(
  {
    limit: Type.Optional(Int32({ minimum: 1, maximum: PARENTS_PAGE_MAX, default: 100 })),
    cursor: Type.Optional(JobId),
  },
  strict,
);

export const RelatedJob = Type.Object(
  {
    id: Type.String(),
    queue: Type.String(),
    state: Nullable(ref(JobState)),
    parent_outcome: Nullable(
      Type.Unsafe<'completed' | 'dead' | 'cancelled'>(
        Type.String({
          enum: ['completed', 'dead', 'cancelled'],
          description: "The parent's outcome as the dependency recorded it; null while the parent is live.",
        }),
      ),
    ),
    result: Json("A completed parent's result (the ack's); null otherwise, and for children."),
    finished_at: Nullable(Timestamp('When it finished.')),
  },
  { $id: 'RelatedJob', description: 'A parent or a child of a job, in its state now (null: pruned).' },
);

export const RelatedJobList = Type.Object(
  {
    jobs: Type.Array(ref(RelatedJob)),
    next_cursor: Nullable(Type.String({ description: 'Pass as cursor for the next page.' })),
  },
  { $id: 'RelatedJobList' },
);

export const JobGraph = Type.Object(
  {
    jobs: Type.Array(
      Type.Object({
        id: Type.String(),
        queue: Type.String(),
        state: Nullable(ref(JobState)),
      }),
      { description: 'The job asked for first, then the jobs reached from it, nearest first.' },
    ),
    edges: Type.Array(
      Type.Object({
        parent: Type.String(),
        child: Type.String({ description: 'Runs once parent has finished.' }),
      }),
      { description: 'The dependencies among the jobs listed.' },
    ),
    truncated: Type.Boolean({ description: `The graph holds more than the ${GRAPH_MAX_JOBS} jobs listed.` }),
  },
  {
    $id: 'JobGraph',
    description: "A job's workflow graph: the jobs its dependencies link it to, either way.",
  },
);

export const JobListQuery = Type.Object(
  {
    state: ref(JobState),
    group: Type.Optional(GroupName),
    limit: Type.Optional(Int32({ minimum: 1, maximum: LIST_LIMIT_MAX, default: 100 })),
    cursor: Type.Optional(Type.String({ maxLength: 400, description: 'next_cursor of the previous page.' })),
    order: Type.Optional(
      Type.Unsafe<'asc' | 'desc'>(
        Type.String({
          enum: ['asc', 'desc'],
          default: 'asc',
          description:
            "asc follows each state's natural order (ready: claim order; scheduled: run_at; claimed: id; " +
            'finished: finished_at, oldest first); desc reverses it.',
        }),
      ),
    ),
    include_payload: Type.Optional(
      Type.Boolean({ default: false, description: 'Payloads (and metadata) are left out unless asked for.' }),
    ),
    count: Type.Optional(
      Type.Boolean({
        default: false,
        description: `Also count the list's jobs (every page), up to ${BULK_MATCH_MAX.toLocaleString('en')}, in \`total\`.`,
      }),
    ),
  },
  strict,
);

export const JobList = Type.Object(
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
        description: `With count=true: more than ${BULK_MATCH_MAX.toLocaleString('en')} jobs are in it.`,
      }),
    ),
    counted_at: Type.Optional(Timestamp("With count=true: the server's time of the count.")),
  },
  { $id: 'JobList' },
);

const awaitMs = Int32({
  minimum: 0,
  maximum: MAX_AWAIT_MS,
  default: 0,
  description:
    `Wait up to this long (at most ${MAX_AWAIT_MS} ms) for the job to finish (completed, dead or cancelled), ` +
    'holding the request open; 0 answers at once. The answer is the job as it is then: finished, or still ' +
    'live when the wait ran out (look at `state`).',
});

export const JobReadQuery = Type.Object({ wait_ms: Type.Optional(awaitMs) }, strict);

export const AwaitRequest = Type.Object(
  {
    ids: Type.Array(JobId, {
      minItems: 1,
      maxItems: MAX_AWAIT_IDS,
      description: 'The jobs to await, each named once.',
    }),
    wait_ms: Type.Optional(awaitMs),
  },
  { ...strict, $id: 'AwaitRequest', examples: [{ ids: ['42', '43'], wait_ms: 30000 }] },
);

export const AwaitResponse = Type.Object(
  {
    jobs: Type.Array(ref(Job), {
      description: 'Every job found, in request order: finished, or still live when the wait ran out.',
    }),
    not_found: Type.Array(Type.String(), {
      description: 'Ids of no job (or of a job in a queue this key may not use), in request order.',
    }),
    finished: Int32({ description: 'How many of `jobs` are completed, dead or cancelled.' }),
    unfinished: Int32({ description: 'How many of `jobs` are still live: 0 when all have finished.' }),
    omitted: Type.Array(Type.String(), {
      description:
        'Ids of jobs answered without payload, result and errors (payload and result null, errors empty), ' +
        'in request order: the answer had reached BATON_AWAIT_ANSWER_MAX_BYTES of them. GET /v1/jobs/{id} ' +
        'reads each whole. Empty for most answers.',
    }),
  },
  { $id: 'AwaitResponse' },
);
