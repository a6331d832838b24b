import { type RawBuilder, sql } from 'kysely';
import type { DeadReason, FinishedState, JobState } from './states.js';

/**
 * One job as the lifecycle queries return it, live or finished. Columns that only one of the two
 * tables has come back NULL from the other.
 */
export interface JobRow {
  id: string;
  queue: string;
  state: JobState;
  priority: number;
  run_at: Date;
  attempts: number;
  max_attempts: number;
  idempotency_key: string | null;
  created_at: Date;
  claimed_at: Date | null;
  lease_expires_at: Date | null;
  worker_id: string | null;
  finished_at: Date | null;
  result: unknown;
  last_error: JobErrorEntry | null;
  errors: JobErrorEntry[];
  dead_reason: DeadReason | null;
  payload: unknown;
}

export interface JobErrorEntry {
  attempt: number;
  at: string;
  message: string;
  details?: unknown;
  worker_id?: string | null;
}

/** Select list of a live baton.jobs row (alias `j`) as a JobRow. */
export const liveJobColumns = sql`
  j.id, j.queue, j.state, j.priority, j.run_at, j.attempts, j.max_attempts, j.idempotency_key,
  j.created_at, j.claimed_at, j.lease_expires_at, j.worker_id, NULL::timestamptz AS finished_at,
  NULL::jsonb AS result, j.last_error, j.errors, NULL::text AS dead_reason, j.payload`;

/** Select list of a baton.job_history row (alias `h`) as a JobRow. */
export const finishedJobColumns = sql`
  h.id, h.queue, h.state, h.priority, h.run_at, h.attempts, h.max_attempts, h.idempotency_key,
  h.created_at, h.claimed_at, NULL::timestamptz AS lease_expires_at, h.worker_id, h.finished_at,
  h.result, h.last_error, h.errors, h.dead_reason, h.payload`;

/**
 * How a job moves from baton.jobs to baton.job_history. Every statement that finishes a job (ack,
 * nack to dead, cancel, purge, re-arm to dead) inserts `finishedRow(...)` selected from a
 * `DELETE ... RETURNING *` of the live row, so a finished job keeps everything it had and each
 * statement says only what is new: the state and, where it has them, the dead reason, the error
 * history, the result and the completing lease token.
 */
export function finishedRow(
  state: FinishedState,
  values: {
    deadReason?: RawBuilder<unknown>;
    lastError?: RawBuilder<unknown>;
    errors?: RawBuilder<unknown>;
    result?: RawBuilder<unknown>;
    ackToken?: RawBuilder<unknown>;
  } = {},
) {
  return {
    columns: sql`id, queue, state, priority, run_at, attempts, max_attempts, worker_id, idempotency_key,
      dead_reason, created_at, claimed_at, finished_at, last_error, errors, result, payload, ack_token`,
    values: sql`id, queue, ${sql.lit(state)}, priority, run_at, attempts, max_attempts, worker_id, idempotency_key,
      ${values.deadReason ?? sql`NULL`}, created_at, claimed_at, now(), ${values.lastError ?? sql`last_error`},
      ${values.errors ?? sql`errors`}, ${values.result ?? sql`NULL`}, payload, ${values.ackToken ?? sql`NULL`}`,
  };
}

/** What an enqueue reads back of each job it created. */
export type EnqueuedRow = Pick<
  JobRow,
  | 'id'
  | 'queue'
  | 'state'
  | 'priority'
  | 'run_at'
  | 'attempts'
  | 'max_attempts'
  | 'idempotency_key'
  | 'created_at'
>;

/** The API's view of a just-enqueued job (no payload echoed back). */
export function toEnqueuedJob(row: EnqueuedRow) {
  return {
    id: row.id,
    queue: row.queue,
    state: row.state,
    priority: row.priority,
    run_at: row.run_at.toISOString(),
    attempts: row.attempts,
    max_attempts: row.max_attempts,
    idempotency_key: row.idempotency_key,
    created_at: row.created_at.toISOString(),
  };
}

/** The API's view of a job. The lease token never appears here. */
export function toJob(row: JobRow) {
  return {
    ...toEnqueuedJob(row),
    payload: row.payload,
    claimed_at: row.claimed_at?.toISOString() ?? null,
    lease_expires_at: row.state === 'claimed' ? (row.lease_expires_at?.toISOString() ?? null) : null,
    worker_id: row.worker_id,
    finished_at: row.finished_at?.toISOString() ?? null,
    result: row.result ?? null,
    last_error: row.last_error && withIsoTime(row.last_error),
    errors: (row.errors ?? []).map(withIsoTime),
    dead_reason: row.dead_reason,
  };
}

/** Entries written before every SQL time was ISO (see db/sql-time.ts) are shown the same way. */
const withIsoTime = (entry: JobErrorEntry): JobErrorEntry => ({
  ...entry,
  at: new Date(entry.at).toISOString(),
});
