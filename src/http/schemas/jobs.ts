import { type Static, Type } from 'typebox';
import {
  ERROR_MESSAGE_MAX,
  ERRORS_KEPT,
  IDEMPOTENCY_KEY_MAX,
  LEASE_MS_MAX,
  LEASE_MS_MIN,
  LIST_LIMIT_MAX,
  MAX_ATTEMPTS_LIMIT,
  MAX_BATCH,
  MAX_DELAY_MS,
  MAX_WAIT_MS,
  PRIORITY_MAX,
  PRIORITY_MIN,
  WORKER_ID_MAX,
} from '../../jobs/limits.js';
import { DEAD_REASONS, JOB_STATES } from '../../jobs/states.js';
import { JobId, Json, LeaseToken, Nullable, PrintableText, QueueName, strict, Timestamp } from './common.js';
import { ref } from './ref.js';

export const QueueParams = Type.Object({ queue: QueueName }, strict);

export const JobParams = Type.Object({ id: JobId }, strict);

export const EnqueueRequest = Type.Object(
  {
    payload: Json('Any JSON value; handed to the worker as is.'),
    priority: Type.Optional(
      Type.Integer({
        minimum: PRIORITY_MIN,
        maximum: PRIORITY_MAX,
        default: 0,
        description: 'Higher runs first.',
      }),
    ),
    delay_ms: Type.Optional(
      Type.Integer({
        minimum: 0,
        maximum: MAX_DELAY_MS,
        description: 'Run no earlier than this long from now.',
      }),
    ),
    run_at: Type.Optional(Timestamp('Run no earlier than this time (RFC 3339). Not with delay_ms.')),
    max_attempts: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: MAX_ATTEMPTS_LIMIT,
        description: 'Claims allowed before the job is dead-lettered. Default: the queue setting.',
      }),
    ),
    idempotency_key: Type.Optional(
      PrintableText(
        IDEMPOTENCY_KEY_MAX,
        'Re-sending the same key to the same queue within the key retention returns the original job ' +
          'and creates nothing.',
      ),
    ),
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
  { ...strict, examples: [{ jobs: [{ payload: { n: 1 } }, { payload: { n: 2 }, delay_ms: 60000 }] }] },
);

const enqueuedFields = {
  id: Type.String(),
  queue: Type.String(),
  state: Type.Unsafe<(typeof JOB_STATES)[number]>(
    Type.String({
      enum: [...JOB_STATES],
      description:
        'A new job is ready when due now and scheduled when run_at is in the future; the original job ' +
        'returned for a repeated idempotency key may be in any state.',
    }),
  ),
  priority: Type.Integer(),
  run_at: Timestamp('When the job becomes claimable.'),
  attempts: Type.Integer(),
  max_attempts: Type.Integer(),
  idempotency_key: Nullable(Type.String()),
  created_at: Timestamp('When the job was enqueued.'),
};

export const EnqueuedJob = Type.Object(enqueuedFields, { $id: 'EnqueuedJob' });
export const BatchEnqueueResponse = Type.Object({
  jobs: Type.Array(
    Type.Object({
      ...enqueuedFields,
      created: Type.Boolean({ description: 'false when an idempotency key matched an existing job.' }),
    }),
  ),
});

export const ClaimRequest = Type.Object(
  {
    max_jobs: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_BATCH, default: 1 })),
    lease_ms: Type.Optional(
      Type.Integer({
        minimum: LEASE_MS_MIN,
        maximum: LEASE_MS_MAX,
        description: 'Lease length. Default: the queue setting.',
      }),
    ),
    wait_ms: Type.Optional(
      Type.Integer({
        minimum: 0,
        maximum: MAX_WAIT_MS,
        default: 0,
        description: 'Long-poll: wait up to this long for a job when none is ready.',
      }),
    ),
    worker_id: Type.Optional(PrintableText(WORKER_ID_MAX, 'Shown on the job.')),
  },
  { ...strict, examples: [{ max_jobs: 10, lease_ms: 60000, wait_ms: 20000, worker_id: 'worker-1' }] },
);

export const ClaimedJob = Type.Object(
  {
    id: Type.String(),
    queue: Type.String(),
    payload: Json('The payload given at enqueue.'),
    priority: Type.Integer(),
    attempt: Type.Integer({ description: '1 on the first claim, 2 on the second, ...' }),
    max_attempts: Type.Integer(),
    lease_token: Type.String({ format: 'uuid', description: 'Present it to renew, ack and nack.' }),
    lease_expires_at: Timestamp('Renew before this or the job returns to the queue.'),
    run_at: Timestamp('When the job became due.'),
    created_at: Timestamp('When the job was enqueued.'),
  },
  { $id: 'ClaimedJob' },
);
export const ClaimResponse = Type.Object({ jobs: Type.Array(ref(ClaimedJob)) });

export const RenewRequest = Type.Object(
  {
    lease_token: LeaseToken,
    lease_ms: Type.Optional(
      Type.Integer({
        minimum: LEASE_MS_MIN,
        maximum: LEASE_MS_MAX,
        description: 'New lease length from now. Default: the length the claim (or the last renew) used.',
      }),
    ),
  },
  { ...strict, examples: [{ lease_token: '3f0e9a52-6a43-4a0c-9d4e-52d1b6e0c001', lease_ms: 60000 }] },
);
export const RenewResponse = Type.Object({
  id: Type.String(),
  lease_expires_at: Timestamp('The new expiry.'),
  lease_ms: Type.Integer(),
});

export const BatchRenewRequest = Type.Object(
  {
    renewals: Type.Array(
      Type.Object(
        {
          id: JobId,
          lease_token: LeaseToken,
          lease_ms: RenewRequest.properties.lease_ms,
        },
        strict,
      ),
      { minItems: 1, maxItems: MAX_BATCH },
    ),
  },
  {
    ...strict,
    examples: [
      { renewals: [{ id: '42', lease_token: '3f0e9a52-6a43-4a0c-9d4e-52d1b6e0c001', lease_ms: 60000 }] },
    ],
  },
);
export const RenewOutcome = Type.Union([
  Type.Literal('renewed'),
  Type.Literal('lease_lost'),
  Type.Literal('not_found'),
]);
export const BatchRenewResponse = Type.Object({
  results: Type.Array(
    Type.Object({
      id: Type.String(),
      outcome: RenewOutcome,
      lease_expires_at: Type.Optional(Timestamp('The new expiry (renewed leases only).')),
      lease_ms: Type.Optional(Type.Integer()),
    }),
    { description: 'One per renewal, in request order.' },
  ),
  renewed: Type.Integer(),
  failed: Type.Integer(),
});

export const AckRequest = Type.Object(
  { lease_token: LeaseToken, result: Type.Optional(Json('Stored and shown on the job.')) },
  { ...strict, examples: [{ lease_token: '3f0e9a52-6a43-4a0c-9d4e-52d1b6e0c001', result: { sent: true } }] },
);

export const BatchAckRequest = Type.Object(
  {
    acks: Type.Array(
      Type.Object(
        {
          id: JobId,
          lease_token: LeaseToken,
          result: Type.Optional(Json('Stored and shown on the job.')),
        },
        strict,
      ),
      { minItems: 1, maxItems: MAX_BATCH },
    ),
  },
  { ...strict, examples: [{ acks: [{ id: '42', lease_token: '3f0e9a52-6a43-4a0c-9d4e-52d1b6e0c001' }] }] },
);
export const AckOutcome = Type.Union([
  Type.Literal('acked'),
  Type.Literal('lease_lost'),
  Type.Literal('not_found'),
]);
export const BatchAckResponse = Type.Object({
  results: Type.Array(Type.Object({ id: Type.String(), outcome: AckOutcome }), {
    description: 'One per ack, in request order.',
  }),
  acked: Type.Integer(),
  failed: Type.Integer(),
});

export const NackRequest = Type.Object(
  {
    lease_token: LeaseToken,
    error: Type.Optional(
      Type.Object(
        {
          message: Type.String({ maxLength: ERROR_MESSAGE_MAX }),
          details: Type.Optional(Json('Anything that helps: a stack trace, a status code...')),
        },
        strict,
      ),
    ),
    retry_in_ms: Type.Optional(
      Type.Integer({
        minimum: 0,
        maximum: MAX_DELAY_MS,
        description: "Retry after this long instead of the queue's backoff.",
      }),
    ),
    dead: Type.Optional(
      Type.Boolean({ description: 'Give up now: the job goes to dead whatever its attempts.' }),
    ),
  },
  {
    ...strict,
    examples: [
      {
        lease_token: '3f0e9a52-6a43-4a0c-9d4e-52d1b6e0c001',
        error: { message: 'SMTP timeout', details: { code: 421 } },
        retry_in_ms: 60000,
      },
    ],
  },
);

export const JobError = Type.Object({
  attempt: Type.Integer(),
  at: Timestamp('When the attempt failed.'),
  message: Type.String(),
  details: Type.Optional(Json('As given by the worker.')),
  worker_id: Type.Optional(Nullable(Type.String())),
});

export const Job = Type.Object(
  {
    ...enqueuedFields,
    payload: Json('The payload given at enqueue.'),
    claimed_at: Nullable(Timestamp('When the latest claim happened.')),
    lease_expires_at: Nullable(Timestamp('While claimed: when the lease runs out.')),
    worker_id: Nullable(Type.String({ description: 'worker_id of the latest claim.' })),
    finished_at: Nullable(Timestamp('When the job reached completed, dead or cancelled.')),
    result: Json('What the worker gave at ack (null until then).'),
    last_error: Nullable(JobError),
    errors: Type.Array(JobError, { description: `Failed attempts, oldest first (the last ${ERRORS_KEPT}).` }),
    dead_reason: Nullable(
      Type.Unsafe<(typeof DEAD_REASONS)[number]>(Type.String({ enum: [...DEAD_REASONS] })),
    ),
    meta: Json(
      'Metadata kept with the job, or null: for a message sent through the SQS endpoint, its message ' +
        'attributes, system attributes and sender (docs/sqs.md). In lists, only with include_payload.',
    ),
  },
  { $id: 'Job' },
);

export const JobListQuery = Type.Object(
  {
    state: Type.Unsafe<(typeof JOB_STATES)[number]>(Type.String({ enum: [...JOB_STATES] })),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: LIST_LIMIT_MAX, default: 100 })),
    cursor: Type.Optional(Type.String({ maxLength: 400, description: 'next_cursor of the previous page.' })),
    order: Type.Optional(
      Type.Union([Type.Literal('asc'), Type.Literal('desc')], {
        default: 'asc',
        description:
          "asc follows each state's natural order (ready: claim order; scheduled: run_at; claimed: id; " +
          'finished: finished_at, oldest first); desc reverses it.',
      }),
    ),
    include_payload: Type.Optional(
      Type.Boolean({ default: false, description: 'Payloads (and metadata) are left out unless asked for.' }),
    ),
  },
  strict,
);

export const JobList = Type.Object({
  jobs: Type.Array(ref(Job)),
  next_cursor: Nullable(Type.String()),
});
