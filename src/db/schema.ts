import type { ColumnType, Generated } from 'kysely';
import type { FinishedState, LiveState } from '../job-states.js';

/**
 * The typed shape of Baton's tables (schema `baton`), as Kysely sees them.
 * `bigint` columns arrive as strings from node-postgres; timestamps as Date.
 */
export interface Database {
  'baton.queues': QueuesTable;
  'baton.jobs': JobsTable;
  'baton.scheduled_jobs': ScheduledJobsTable;
  'baton.waiting_jobs': WaitingJobsTable;
  'baton.job_edges': JobEdgesTable;
  'baton.job_history': JobHistoryTable;
  'baton.idempotency_keys': IdempotencyKeysTable;
  'baton.unique_keys': UniqueKeysTable;
  'baton.leader': LeaderTable;
  'baton.queue_stats': QueueStatsTable;
  'baton.queue_history': QueueHistoryTable;
  'baton.schedules': SchedulesTable;
  'baton.queue_groups': QueueGroupsTable;
  'baton.flow_state': FlowStateTable;
  'baton.group_stats': GroupStatsTable;
  'baton.server_secrets': ServerSecretsTable;
  'baton.receive_attempts': ReceiveAttemptsTable;
  'baton.message_moves': MessageMovesTable;
}

type Timestamp = ColumnType<Date, Date | string, Date | string>;
type BigIntString = ColumnType<string, string | number | bigint, string | number | bigint>;
/** jsonb: parsed on read; written as JSON text. */
type Json = ColumnType<unknown, string, string>;

export interface QueuesTable {
  name: string;
  lease_ms: number | null;
  max_attempts: number | null;
  backoff_base_ms: number | null;
  backoff_max_ms: number | null;
  backoff_jitter: boolean | null;
  completed_retention_ms: BigIntString | null;
  dead_retention_ms: BigIntString | null;
  paused: Generated<boolean>;
  auto_created: boolean;
  /** Set by the first enqueue of a job with a group (src/jobs/enqueue.ts); read by the claims (src/jobs/claim/). */
  grouped: Generated<boolean>;
  concurrency_limit: number | null;
  rate_limit: number | null;
  rate_period_ms: number | null;
  group_concurrency_limit: number | null;
  group_rate_limit: number | null;
  group_rate_period_ms: number | null;
  created_at: Generated<Date>;
  updated_at: Generated<Date>;
  /** Per-queue metadata (migrations/0008_job_meta.ts): SQS attributes and tags, a dead-letter queue. */
  meta: Json | null;
  /** Default budget per attempt of the queue's jobs (migrations/0009_time_limits.ts); null: none. */
  timeout_ms: number | null;
}

/** Ready and claimed jobs: the ring (src/jobs/ring.ts). */
export interface JobsTable {
  slot: number;
  id: string;
  queue: string;
  group_key: Generated<string>;
  state: Exclude<LiveState, 'scheduled' | 'waiting'>;
  priority: number;
  run_at: Timestamp;
  attempts: Generated<number>;
  max_attempts: number;
  lease_token: string | null;
  lease_ms: number | null;
  lease_expires_at: Timestamp | null;
  claimed_at: Timestamp | null;
  worker_id: string | null;
  idempotency_key: string | null;
  created_at: Generated<Date>;
  last_error: Json | null;
  errors: Generated<Json>;
  payload: Json;
  /** Per-job metadata (migrations/0008_job_meta.ts), e.g. SQS message attributes. */
  meta: Json | null;
  /** Deadlines, expiry, unique jobs (migrations/0009_time_limits.ts). */
  timeout_ms: number | null;
  deadline_at: Timestamp | null;
  expires_at: Timestamp | null;
  unique_key: string | null;
  /** What the worker last reported with a renewal (migrations/0017_job_progress.ts), or null. */
  progress: Json | null;
  /** The lease token of the nack that last moved the job, its receipt (migrations/0020_nack_receipts.ts). */
  nacked_token: string | null;
  /** The job has children (migrations/0016_job_dependencies.ts): its finish releases them. */
  dependents: Generated<boolean>;
}

/** Jobs waiting for their run_at, out of the ring until the promoter moves them in. */
export interface ScheduledJobsTable {
  id: string;
  queue: string;
  group_key: Generated<string>;
  priority: number;
  run_at: Timestamp;
  attempts: Generated<number>;
  max_attempts: number;
  claimed_at: Timestamp | null;
  worker_id: string | null;
  idempotency_key: string | null;
  created_at: Generated<Date>;
  last_error: Json | null;
  errors: Generated<Json>;
  payload: Json;
  meta: Json | null;
  timeout_ms: number | null;
  expires_at: Timestamp | null;
  unique_key: string | null;
  progress: Json | null;
  nacked_token: string | null;
  dependents: Generated<boolean>;
}

/** Jobs waiting for their parents (migrations/0016_job_dependencies.ts, jobs/dependencies.ts). */
export interface WaitingJobsTable extends ScheduledJobsTable {
  /** Parents not finished yet: a row-locked counter; whoever takes it to 0 promotes the job. */
  pending: number;
  parents_failed: Generated<number>;
  on_parent_failure: 'cancel' | 'run';
}

/** One dependency, kept after the child leaves waiting (its parents' results, a job's graph). */
export interface JobEdgesTable {
  child: string;
  parent: string;
  child_queue: string;
  parent_queue: string;
  on_parent_failure: 'cancel' | 'run';
  /** The parent's finished state once it has one; null while it is live. */
  parent_outcome: 'completed' | 'dead' | 'cancelled' | null;
  created_at: Generated<Date>;
}

export interface JobHistoryTable {
  id: string;
  queue: string;
  group_key: Generated<string>;
  state: FinishedState;
  priority: number;
  run_at: Timestamp;
  attempts: number;
  max_attempts: number;
  worker_id: string | null;
  idempotency_key: string | null;
  dead_reason: string | null;
  created_at: Timestamp;
  claimed_at: Timestamp | null;
  finished_at: Generated<Date>;
  last_error: Json | null;
  errors: Generated<Json>;
  result: Json | null;
  payload: Json;
  ack_token: string | null;
  meta: Json | null;
  timeout_ms: number | null;
  expires_at: Timestamp | null;
  unique_key: string | null;
  progress: Json | null;
  nacked_token: string | null;
  dependents: Generated<boolean>;
}

/** The waiting job that holds a unique key (src/jobs/unique.ts); stale once that job no longer waits. */
export interface UniqueKeysTable {
  queue: string;
  key: string;
  job_id: BigIntString;
  /** Bumped by each job that comes back to waiting and takes the row's lock (jobs/unique-return.ts). */
  generation: Generated<BigIntString>;
}

export interface IdempotencyKeysTable {
  queue: string;
  key: string;
  job_id: string;
  expires_at: Timestamp;
}

export interface LeaderTable {
  name: string;
  holder: string;
  term: Generated<string>;
  acquired_at: Generated<Date>;
  expires_at: Timestamp;
}

export interface QueueStatsTable {
  queue: string;
  /** Jobs waiting for parents (migrations/0016_job_dependencies.ts). */
  waiting: Generated<BigIntString>;
  scheduled: BigIntString;
  ready: BigIntString;
  claimed: BigIntString;
  oldest_ready_at: Timestamp | null;
  live_refreshed_at: Timestamp | null;
  completed: BigIntString;
  dead: BigIntString;
  cancelled: BigIntString;
  completed_last_minute: BigIntString;
  /** Live jobs whose last attempt failed (migrations/0022_failed_attempts.ts). */
  failing: Generated<BigIntString>;
  finished_refreshed_at: Timestamp | null;
  groups_refreshed_at: Timestamp | null;
}

/** One sample per queue and minute (src/maintenance/queue-history.ts). */
export interface QueueHistoryTable {
  queue: string;
  minute: Timestamp;
  at: Timestamp;
  since: Timestamp;
  scheduled: BigIntString;
  ready: BigIntString;
  claimed: BigIntString;
  oldest_ready_age_ms: BigIntString | null;
  enqueued: BigIntString | null;
  completed: BigIntString;
  dead: BigIntString;
  cancelled: BigIntString;
  /** Attempts that failed in the window; null in samples from before it was counted (migration 0022). */
  attempts_failed: BigIntString | null;
}

/** Cron schedules (src/schedules/). */
export interface SchedulesTable {
  name: string;
  queue: string;
  cron: string;
  timezone: string;
  payload: Json;
  priority: number;
  max_attempts: number | null;
  overlap: 'allow' | 'skip';
  catch_up: 'none' | 'latest' | 'all';
  paused: boolean;
  next_run_at: Timestamp | null;
  last_run_at: Timestamp | null;
  last_job_id: string | null;
  last_error: Json | null;
  file_spec: Json | null;
  created_at: Generated<Date>;
  updated_at: Generated<Date>;
}

/** A group's overrides of its queue's group defaults, set by operators (PUT /v1/queues/{q}/groups/{g}). */
export interface QueueGroupsTable {
  queue: string;
  group_key: string;
  concurrency_limit: number | null;
  rate_limit: number | null;
  rate_period_ms: number | null;
  weight: number | null;
  paused: Generated<boolean>;
  updated_at: Generated<Date>;
}

/** What claims of a flow-controlled queue remember between claims (src/jobs/claim/: grouped.ts, limited.ts, flow.ts). */
export interface FlowStateTable {
  queue: string;
  group_key: Generated<string>;
  is_queue: boolean;
  last_group: string | null;
  claim_times: Generated<Date[]>;
  claim_counts: Generated<number[]>;
}

/** Per-group counts, kept by the leader (src/maintenance/group-stats.ts). */
export interface GroupStatsTable {
  queue: string;
  group_key: string;
  ready: BigIntString;
  claimed: BigIntString;
  scheduled: BigIntString;
}

/** Secrets the replicas share (db/server-secrets.ts), made by migration 0012. */
export interface ServerSecretsTable {
  name: string;
  secret: Buffer;
  created_at: Generated<Date>;
}

/** What an SQS FIFO receive with a ReceiveRequestAttemptId handed out (jobs/receive-attempts.ts), migration 0015. */
export interface ReceiveAttemptsTable {
  queue: string;
  caller: string;
  attempt_id: string;
  job_ids: string[];
  lease_tokens: string[];
  leases_until: Date[];
  created_at: Generated<Date>;
}

export interface MessageMovesTable {
  id: Generated<string>;
  source_queue: string;
  destination_queue: string | null;
  max_per_second: number | null;
  patterns: string[] | null;
  status: Generated<'running' | 'completed' | 'cancelled' | 'failed'>;
  moved: Generated<string>;
  to_move: string;
  failure_reason: string | null;
  started_at: Generated<Date>;
  progressed_at: Generated<Date>;
  finished_at: Date | null;
}
