import { Type } from 'typebox';
import {
  BACKOFF_BASE_MS_MAX,
  BACKOFF_MAX_MS_MAX,
  CONCURRENCY_LIMIT_MAX,
  HISTORY_MINUTES_MAX,
  LEASE_MS_MAX,
  LEASE_MS_MIN,
  MAX_ATTEMPTS_LIMIT,
  MAX_BATCH,
  RATE_LIMIT_MAX,
  RATE_PERIOD_MS_MAX,
  RATE_PERIOD_MS_MIN,
  RETENTION_MS_MAX,
  TIMEOUT_MS_MAX,
  TIMEOUT_MS_MIN,
} from '../../jobs/limits.js';
import { Int32, Int64, JobId, Nullable, PageOf, PageQuery, strict, Timestamp } from './common.js';
import { ref } from './ref.js';

/** A concurrency limit: at most this many jobs claimed at once, across every replica. */
export const ConcurrencyLimit = (description: string) =>
  Int32({ minimum: 1, maximum: CONCURRENCY_LIMIT_MAX, description });

export const RateLimit = Type.Object(
  {
    limit: Int32({ minimum: 1, maximum: RATE_LIMIT_MAX, description: 'At most this many jobs claimed...' }),
    period_ms: Int32({
      minimum: RATE_PERIOD_MS_MIN,
      maximum: RATE_PERIOD_MS_MAX,
      description: '... in any window of this many ms (a sliding window; see docs/architecture.md).',
    }),
  },
  {
    ...strict,
    $id: 'RateLimit',
    description:
      'At most `limit` jobs claimed in any window of `period_ms`, across every replica. Never exceeded; a ' +
      'claim may be let through up to 1% of the period later than the limit strictly requires.',
    examples: [{ limit: 100, period_ms: 60000 }],
  },
);

const limitFields = {
  concurrency_limit: Type.Optional(
    Nullable(ConcurrencyLimit('At most this many jobs of the queue claimed at once. null: no limit.')),
  ),
  rate_limit: Type.Optional(Nullable(ref(RateLimit))),
  group_concurrency_limit: Type.Optional(
    Nullable(ConcurrencyLimit('At most this many jobs of any one group claimed at once. null: no limit.')),
  ),
  group_rate_limit: Type.Optional(Nullable(ref(RateLimit))),
};

export const QueueConfigRequest = Type.Object(
  {
    lease_ms: Type.Optional(Nullable(Int32({ minimum: LEASE_MS_MIN, maximum: LEASE_MS_MAX }))),
    max_attempts: Type.Optional(Nullable(Int32({ minimum: 1, maximum: MAX_ATTEMPTS_LIMIT }))),
    backoff: Type.Optional(
      Type.Object(
        {
          base_ms: Type.Optional(Nullable(Int32({ minimum: 0, maximum: BACKOFF_BASE_MS_MAX }))),
          max_ms: Type.Optional(Nullable(Int64({ minimum: 0, maximum: BACKOFF_MAX_MS_MAX }))),
          jitter: Type.Optional(Nullable(Type.Boolean())),
        },
        strict,
      ),
    ),
    retention: Type.Optional(
      Type.Object(
        {
          completed_ms: Type.Optional(Nullable(Int64({ minimum: 0, maximum: RETENTION_MS_MAX }))),
          dead_ms: Type.Optional(Nullable(Int64({ minimum: 0, maximum: RETENTION_MS_MAX }))),
        },
        strict,
      ),
    ),
    paused: Type.Optional(Type.Boolean()),
    timeout_ms: Type.Optional(
      Nullable(
        Int32({
          minimum: TIMEOUT_MS_MIN,
          maximum: TIMEOUT_MS_MAX,
          description:
            'Budget of one attempt, from claim, for jobs enqueued without timeout_ms. No server default: null removes it.',
        }),
      ),
    ),
    ...limitFields,
  },
  {
    ...strict,
    $id: 'QueueConfigRequest',
    description:
      'Fields you give are set; fields you leave out keep their value (a new queue starts at the server ' +
      'defaults); null resets a field to the server default. The limits (flow control) have no server ' +
      'default: null removes one. group_concurrency_limit and group_rate_limit apply to each group of the ' +
      'queue on its own, unless the group overrides them (PUT /v1/queues/{queue}/groups/{group}).',
    examples: [{ lease_ms: 120000, max_attempts: 10, backoff: { base_ms: 5000, max_ms: 600000 } }],
  },
);

export const Queue = Type.Object(
  {
    name: Type.String(),
    auto_created: Type.Boolean({
      description: 'Created by a first enqueue; collected by the leader when idle.',
    }),
    paused: Type.Boolean({ description: 'A paused queue accepts enqueues but hands out nothing.' }),
    lease_ms: Int32(),
    max_attempts: Int32(),
    backoff: Type.Object({ base_ms: Int32(), max_ms: Int64(), jitter: Type.Boolean() }),
    retention: Type.Object({ completed_ms: Int64(), dead_ms: Int64() }),
    concurrency_limit: Nullable(Int32()),
    rate_limit: Nullable(ref(RateLimit)),
    group_concurrency_limit: Nullable(Int32()),
    group_rate_limit: Nullable(ref(RateLimit)),
    grouped: Type.Boolean({
      description: 'Jobs with a group have been enqueued: claims serve the groups in turn.',
    }),
    timeout_ms: Nullable(
      Int32({ description: 'Budget of one attempt for jobs without their own; null: none.' }),
    ),
    push: Type.Boolean({
      description:
        'Baton POSTs its jobs to an endpoint (GET /v1/queues/{queue}/push, admin keys; docs/push.md).',
    }),
    inherited: Type.Array(Type.String(), { description: 'Settings that follow the server default.' }),
    created_at: Timestamp(),
    updated_at: Timestamp(),
    stats: Type.Object(
      {
        waiting: Int64({ description: 'Jobs waiting for their parents (depends_on).' }),
        scheduled: Int64(),
        ready: Int64(),
        claimed: Int64(),
        completed: Int64({
          description:
            'Kept in history within retention, as of finished_refreshed_at (counted about once a minute, so it ' +
            'lags completed_last_minute; 0 before the first count).',
        }),
        dead: Int64({ description: 'Kept in history within retention, as of finished_refreshed_at.' }),
        cancelled: Int64({ description: 'Kept in history within retention, as of finished_refreshed_at.' }),
        oldest_ready_age_ms: Nullable(Int64({ description: 'Age of the oldest ready job when counted.' })),
        failing: Int64({
          description:
            'Live jobs whose last attempt failed: waiting for a retry, or ready or running again (counted every tick).',
        }),
        completed_last_minute: Int64({
          description: 'Completed in the minute before live_refreshed_at (counted every tick).',
        }),
        live_refreshed_at: Nullable(Timestamp()),
        finished_refreshed_at: Nullable(Timestamp()),
      },
      {
        description:
          'Counts maintained by the maintenance leader (not counted per request): live counts every tick, ' +
          'finished counts every minute, exact as of the refreshed_at times (null before the first count).',
      },
    ),
  },
  { $id: 'Queue' },
);

export const QueueList = PageOf('queues', ref(Queue), 'QueueList');

export const QueueListQuery = PageQuery(200);

export const DeleteQueueQuery = Type.Object(
  {
    force: Type.Optional(
      Type.Boolean({ default: false, description: 'Cancel live jobs instead of refusing.' }),
    ),
  },
  strict,
);

export const DeletedQueue = Type.Object(
  {
    name: Type.String(),
    deleted: Type.Literal(true),
    cancelled: Int64({ description: 'Live jobs cancelled by force.' }),
  },
  { $id: 'DeletedQueue', description: 'A deleted queue, and how many live jobs its deletion cancelled.' },
);

export const PurgeResponse = Type.Object({ cancelled: Int64() }, { $id: 'PurgeResponse' });

export const RedriveRequest = Type.Object(
  {
    ids: Type.Optional(
      Type.Array(JobId, {
        minItems: 1,
        maxItems: MAX_BATCH,
        uniqueItems: true,
      }),
    ),
    dead_since: Type.Optional(Timestamp('Dead jobs that died at or after this.')),
    all: Type.Optional(Type.Boolean({ description: 'Every dead job of the queue.' })),
  },
  {
    ...strict,
    $id: 'RedriveRequest',
    description: 'Exactly one of ids, dead_since or all: true.',
    examples: [{ all: true }, { ids: ['41', '42'] }],
  },
);

export const RedriveResponse = Type.Object({ redriven: Int64() }, { $id: 'RedriveResponse' });

export const QueueHistoryQuery = Type.Object(
  {
    minutes: Type.Optional(
      Type.Integer({
        format: 'int32',
        minimum: 1,
        maximum: HISTORY_MINUTES_MAX,
        default: 60,
        description: 'How far back: the current minute and the ones before it (history is kept a day).',
      }),
    ),
  },
  strict,
);

const Count = (description: string) => Int64({ minimum: 0, description });

export const QueueSample = Type.Object(
  {
    minute: Timestamp('The minute the sample belongs to.'),
    at: Timestamp('When the live counts were taken.'),
    since: Timestamp(
      'Start of the window the flows cover: the previous sample (a minute earlier, unless the minutes ' +
        'between were idle or the service had no leader).',
    ),
    scheduled: Count('Live count at `at`.'),
    ready: Count('Live count at `at`.'),
    claimed: Count('Live count at `at`.'),
    oldest_ready_age_ms: Nullable(
      Count('Queue lag at `at`: age of the oldest ready job (null: none ready).'),
    ),
    enqueued: Nullable(
      Count(
        'Jobs that arrived in the window (enqueued or redriven), derived as live now − live at `since` + ' +
          'finished in the window; null on the first sample of a queue that existed before history did.',
      ),
    ),
    completed: Count('Jobs completed in the window.'),
    dead: Count('Jobs that went dead in the window (attempts used up, or nacked dead).'),
    cancelled: Count('Jobs cancelled in the window (cancel, purge, forced delete).'),
    attempts_failed: Nullable(
      Count(
        'Attempts that failed in the window (a nack, a lease that ran out, a deadline), whether the job then ' +
          'retried or went dead; null on samples taken before Baton counted them.',
      ),
    ),
  },
  { $id: 'QueueSample' },
);

export const QueueHistory = Type.Object(
  {
    queue: Type.String(),
    now: Timestamp('The database clock when this was read.'),
    samples: Type.Array(ref(QueueSample), {
      description:
        'Oldest first, at most one per minute. A minute without a sample was idle: no live jobs and nothing ' +
        'finished (or the service had no maintenance leader then).',
    }),
  },
  { $id: 'QueueHistory' },
);
