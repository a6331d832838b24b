import type { ColumnType, Generated } from 'kysely';
import type { FinishedState, LiveState } from '../jobs/states.js';

/**
 * The typed shape of Baton's tables (schema `baton`), as Kysely sees them.
 * `bigint` columns arrive as strings from node-postgres; timestamps as Date.
 */
export interface Database {
  'baton.queues': QueuesTable;
  'baton.jobs': JobsTable;
  'baton.job_history': JobHistoryTable;
  'baton.idempotency_keys': IdempotencyKeysTable;
  'baton.leader': LeaderTable;
  'baton.queue_stats': QueueStatsTable;
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
  created_at: Generated<Date>;
  updated_at: Generated<Date>;
  /** Per-queue metadata (migrations/0009_job_meta.ts): SQS attributes and tags, a dead-letter queue. */
  meta: Json | null;
}

export interface JobsTable {
  id: Generated<string>;
  queue: string;
  state: LiveState;
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
  /** Per-job metadata (migrations/0009_job_meta.ts), e.g. SQS message attributes. */
  meta: Json | null;
}

export interface JobHistoryTable {
  id: string;
  queue: string;
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
  scheduled: BigIntString;
  ready: BigIntString;
  claimed: BigIntString;
  oldest_ready_at: Timestamp | null;
  live_refreshed_at: Timestamp | null;
  completed: BigIntString;
  dead: BigIntString;
  cancelled: BigIntString;
  completed_last_minute: BigIntString;
  finished_refreshed_at: Timestamp | null;
}
