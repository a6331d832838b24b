import { type RawBuilder, sql } from 'kysely';
import type { DeadReason, FinishedState, JobState } from '../job-states.js';
import { ERRORS_KEPT } from './limits.js';

/**
 * One job as the lifecycle queries return it, live or finished. Columns that only one of the two
 * tables has come back NULL from the other.
 */
export interface JobRow {
  id: string;
  queue: string;
  /** '' when the job has no group. */
  group_key: string;
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
  /** Metadata kept with the job (migrations/0008_job_meta.ts), or null. */
  meta: unknown;
  /** The job's own budget per attempt (null: the queue's, if any). */
  timeout_ms: number | null;
  /** While claimed with a budget: when the attempt's time is up (claimed_at + the budget). */
  deadline_at: Date | null;
  /** No attempt starts after this (null: never expires). */
  expires_at: Date | null;
  unique_key: string | null;
  /** What the worker last reported with a renewal (migrations/0017_job_progress.ts), or null. */
  progress: unknown;
}

/**
 * A JobRow's columns by name, in the order of the select lists below, with their SQL types: for a row
 * that stands in NULL for some of them (ack-and-claim's claimed jobs, claim/ack-and-claim.ts).
 */
export const jobRowColumns = {
  id: 'bigint',
  queue: 'text',
  group_key: 'text',
  state: 'text',
  priority: 'integer',
  run_at: 'timestamptz',
  attempts: 'integer',
  max_attempts: 'integer',
  idempotency_key: 'text',
  created_at: 'timestamptz',
  claimed_at: 'timestamptz',
  lease_expires_at: 'timestamptz',
  worker_id: 'text',
  finished_at: 'timestamptz',
  result: 'jsonb',
  last_error: 'jsonb',
  errors: 'jsonb',
  dead_reason: 'text',
  payload: 'jsonb',
  meta: 'jsonb',
  timeout_ms: 'integer',
  deadline_at: 'timestamptz',
  expires_at: 'timestamptz',
  unique_key: 'text',
  progress: 'jsonb',
} as const satisfies Record<keyof JobRow, string>;

export interface JobErrorEntry {
  attempt: number;
  at: string;
  message: string;
  details?: unknown;
  worker_id?: string | null;
  /** Set when Baton failed the attempt itself: `lease_expired`, `deadline_exceeded` or `expired`. */
  reason?: string;
}

/** Select list of a ready or claimed baton.jobs row (alias `j`) as a JobRow. */
export const liveJobColumns = sql`
  j.id, j.queue, j.group_key, j.state, j.priority, j.run_at, j.attempts, j.max_attempts, j.idempotency_key,
  j.created_at, j.claimed_at, j.lease_expires_at, j.worker_id, NULL::timestamptz AS finished_at,
  NULL::jsonb AS result, j.last_error, j.errors, NULL::text AS dead_reason, j.payload, j.meta,
  j.timeout_ms, j.deadline_at, j.expires_at, j.unique_key, j.progress`;

/** Select list of a baton.scheduled_jobs row (alias `s`) as a JobRow. */
export const scheduledJobColumns = sql`
  s.id, s.queue, s.group_key, 'scheduled'::text AS state, s.priority, s.run_at, s.attempts, s.max_attempts,
  s.idempotency_key, s.created_at, s.claimed_at, NULL::timestamptz AS lease_expires_at, s.worker_id,
  NULL::timestamptz AS finished_at, NULL::jsonb AS result, s.last_error, s.errors, NULL::text AS dead_reason,
  s.payload, s.meta, s.timeout_ms, NULL::timestamptz AS deadline_at, s.expires_at, s.unique_key, s.progress`;

/** Select list of a baton.waiting_jobs row (alias `w`) as a JobRow: a job waiting for its parents. */
export const waitingJobColumns = sql`
  w.id, w.queue, w.group_key, 'waiting'::text AS state, w.priority, w.run_at, w.attempts, w.max_attempts,
  w.idempotency_key, w.created_at, w.claimed_at, NULL::timestamptz AS lease_expires_at, w.worker_id,
  NULL::timestamptz AS finished_at, NULL::jsonb AS result, w.last_error, w.errors, NULL::text AS dead_reason,
  w.payload, w.meta, w.timeout_ms, NULL::timestamptz AS deadline_at, w.expires_at, w.unique_key, w.progress`;

/** Select list of a baton.job_history row (alias `h`) as a JobRow. */
export const finishedJobColumns = sql`
  h.id, h.queue, h.group_key, h.state, h.priority, h.run_at, h.attempts, h.max_attempts, h.idempotency_key,
  h.created_at, h.claimed_at, NULL::timestamptz AS lease_expires_at, h.worker_id, h.finished_at,
  h.result, h.last_error, h.errors, h.dead_reason, h.payload, h.meta, h.timeout_ms, NULL::timestamptz AS deadline_at,
  h.expires_at, h.unique_key, h.progress`;

/** The columns every live job has, in the ring or scheduled (of table alias `a`): what finishedRow() reads. */
export function liveCommonColumns(a: string) {
  const t = sql.ref(a);
  return sql`${t}.id, ${t}.queue, ${t}.group_key, ${t}.priority, ${t}.run_at, ${t}.attempts, ${t}.max_attempts, ${t}.worker_id,
    ${t}.idempotency_key, ${t}.created_at, ${t}.claimed_at, ${t}.last_error, ${t}.errors, ${t}.payload, ${t}.meta,
    ${t}.timeout_ms, ${t}.expires_at, ${t}.unique_key, ${t}.progress, ${t}.nacked_token, ${t}.dependents`;
}

/**
 * The columns a job keeps when it moves between baton.jobs and baton.scheduled_jobs (promote, nack
 * with a delay) or back from history (redrive): every such INSERT lists `carriedColumns`, then what
 * the move sets, and selects `carriedValues()`, with a different value for any it changes.
 */
const CARRIED = [
  'id',
  'queue',
  'group_key',
  'priority',
  'max_attempts',
  'idempotency_key',
  'created_at',
  'payload',
  'meta',
  'timeout_ms',
  'expires_at',
  'unique_key',
  'progress',
  // The receipt of the nack that last moved it (migrations/0020_nack_receipts.ts).
  'nacked_token',
  // The job has children (jobs/dependencies.ts): its finish must release them, wherever it is then.
  'dependents',
] as const;
export const carriedColumns = sql.join(CARRIED.map((c) => sql.ref(c)));
export function carriedValues(changed: Partial<Record<(typeof CARRIED)[number], RawBuilder<unknown>>> = {}) {
  return sql.join(CARRIED.map((c) => changed[c] ?? sql.ref(c)));
}

/**
 * How a job moves into baton.job_history. Every statement that finishes a job (ack, nack to dead,
 * cancel, purge, re-arm to dead) inserts `finishedRow(...)` selected from a `DELETE ... RETURNING *` of
 * the live row (from baton.jobs or baton.scheduled_jobs: both have these columns), so a finished job
 * keeps everything it had and each statement says only what is new: the state and, where it has them,
 * the dead reason, the error history, the result and the completing lease token.
 */
export function finishedRow(
  state: FinishedState,
  values: {
    deadReason?: RawBuilder<unknown>;
    lastError?: RawBuilder<unknown>;
    errors?: RawBuilder<unknown>;
    result?: RawBuilder<unknown>;
    ackToken?: RawBuilder<unknown>;
    /** The worker's last progress (an ack or nack that carries it); without it, the job's own. */
    progress?: RawBuilder<unknown>;
    /** A nack's lease token (its receipt); without it, the job's own. */
    nackedToken?: RawBuilder<unknown>;
  } = {},
) {
  return {
    columns: sql`id, queue, group_key, state, priority, run_at, attempts, max_attempts, worker_id, idempotency_key,
      dead_reason, created_at, claimed_at, finished_at, last_error, errors, result, payload, ack_token, meta,
      timeout_ms, expires_at, unique_key, progress, nacked_token, dependents`,
    values: sql`id, queue, group_key, ${sql.lit(state)}, priority, run_at, attempts, max_attempts, worker_id, idempotency_key,
      ${values.deadReason ?? sql`NULL`}, created_at, claimed_at, now(), ${values.lastError ?? sql`last_error`},
      ${values.errors ?? sql`errors`}, ${values.result ?? sql`NULL`}, payload, ${values.ackToken ?? sql`NULL`}, meta,
      timeout_ms, expires_at, unique_key, ${values.progress ?? sql`progress`}, ${values.nackedToken ?? sql`nacked_token`}, dependents`,
  };
}

/**
 * Claim order: higher priority first, then the job due longest, then the older id. jobs_ready_idx
 * is declared in this order (migrations/0001_initial.ts), so a claim reads the index from its head;
 * the job list shows ready jobs in the same order. `reverse` flips every key (for `order=desc`).
 */
export function claimOrder(alias: string, reverse = false) {
  const a = sql.ref(alias);
  const [first, rest] = reverse ? [sql`ASC`, sql`DESC`] : [sql`DESC`, sql`ASC`];
  return sql`${a}.priority ${first}, ${a}.run_at ${rest}, ${a}.id ${rest}`;
}

/** The same order for rows already in memory (UPDATE ... RETURNING does not keep it). */
export function compareClaimOrder(
  a: { priority: number; run_at: Date; id: string },
  b: { priority: number; run_at: Date; id: string },
): number {
  return b.priority - a.priority || a.run_at.getTime() - b.run_at.getTime() || compareIds(a.id, b.id);
}

/** Ids are decimal strings without leading zeros: shorter is smaller. */
export function compareIds(a: string, b: string): number {
  return a.length - b.length || (a < b ? -1 : a > b ? 1 : 0);
}

/**
 * A ready job that may still be handed out: not past its expires_at. Every pick of a claim adds it
 * beside the ready index's order (a filter on the rows the index walk reads, so the walk still
 * stops after LIMIT rows); the leader's expiry sweep then moves such jobs to dead.
 */
export function notExpired(alias: string) {
  const a = sql.ref(alias);
  return sql`(${a}.expires_at IS NULL OR ${a}.expires_at > now())`;
}

/**
 * `<alias>` is claimed under this lease token. The token alone says so (constraint jobs_lease: a live
 * row has a token exactly while claimed). Writing `state = 'claimed'` as well lets the planner answer
 * a batch from jobs_claimed_idx, whose predicate that is: every claimed row of each partition, each
 * compared with every item, instead of probing the primary key for the batch's ids. On the ring's
 * "almost empty" statistics it did: every ack compared with every claimed row
 * (docs/benchmarks.md, "What was tried and what it gave", row "Batch ack matched by position").
 */
export function leaseHeld(alias: string, token: RawBuilder<unknown>) {
  return sql`${sql.ref(alias)}.lease_token = ${token}`;
}

/**
 * `<alias>` is a job of `queue`, or of any queue when `queue` is NULL: the tenant boundary of every
 * statement that names jobs by id (renew, ack, nack, cancel, read). A caller whose key is limited to
 * queue patterns passes the queue it was allowed (the job's, checked by plugins/auth.ts, or the SQS
 * request's QueueUrl), so the statement itself cannot touch a job of another queue, whatever id,
 * token or receipt handle it was given. A filter on the rows the statement found by id: no index, no
 * other plan.
 */
export function inScope(alias: string, queue: RawBuilder<unknown>) {
  const a = sql.ref(alias);
  return sql`${a}.queue = coalesce(${queue}, ${a}.queue)`;
}

/**
 * The progress a lease write leaves on the job (renew, ack, nack): `given` is the worker's report as
 * JSON text, SQL NULL when it sent none (the job keeps `kept`, what it has); JSON null clears it (a
 * job's progress is SQL NULL, never JSON null). `given` appears once, so its array of reports is
 * sent once.
 */
export function givenProgress(given: RawBuilder<unknown>, kept: RawBuilder<unknown>) {
  return sql`nullif(coalesce((${given})::jsonb, ${kept}), 'null'::jsonb)`;
}

/** SET list that ends a lease (nack, re-arm, a claim given back): no token, no length, no expiry. */
export const clearedLease = sql`lease_token = NULL, lease_ms = NULL, lease_expires_at = NULL, deadline_at = NULL`;

/**
 * A job's error history with `entry` appended, keeping the last ERRORS_KEPT entries: the one place
 * the history is trimmed (nack and re-arm both write through it).
 */
export function appendError(errors: RawBuilder<unknown>, entry: RawBuilder<unknown>) {
  return sql`(SELECT coalesce(jsonb_agg(e ORDER BY n), '[]'::jsonb)
    FROM (SELECT e, n FROM jsonb_array_elements(${errors} || jsonb_build_array(${entry})) WITH ORDINALITY AS a(e, n)
          ORDER BY n DESC LIMIT ${sql.lit(ERRORS_KEPT)}) kept)`;
}

/** What an enqueue reads back of each job it created. */
export type EnqueuedRow = Pick<
  JobRow,
  | 'id'
  | 'queue'
  | 'group_key'
  | 'state'
  | 'priority'
  | 'run_at'
  | 'attempts'
  | 'max_attempts'
  | 'idempotency_key'
  | 'created_at'
  | 'timeout_ms'
  | 'expires_at'
  | 'unique_key'
>;
