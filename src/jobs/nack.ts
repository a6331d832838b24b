import { type RawBuilder, sql } from 'kysely';
import type { Db } from '../db/database.js';
import type { DeadReason } from '../job-states.js';
import { effectiveSettings, type QueueDefaults } from '../queues/queue-settings.js';
import { retryDelayMs } from './backoff.js';
import {
  appendError,
  carriedColumns,
  carriedValues,
  clearedLease,
  finishedJobColumns,
  finishedRow,
  inScope,
  type JobErrorEntry,
  type JobRow,
  liveJobColumns,
  scheduledJobColumns,
} from './job-row.js';
import { type LeaseOutcome, outcomesOf, type ScopedId } from './lease-outcome.js';
import { anySlot, inSlotOf, retryWhenMoved } from './ring.js';
import { settleReturnedKeys } from './unique-return.js';

/**
 * Nack: the worker holding the current lease says this attempt failed. The job either goes back to
 * wait for a retry (`scheduled` after a delay, or `ready` at once for a zero delay) or, when its
 * attempts are used up or the worker says `dead: true`, moves to job_history as `dead`.
 *
 * Two statements in one transaction: first lock the row, guarded by the lease token exactly like
 * ack, and read what the decision needs (attempts, the queue's backoff, the error history); then
 * write the outcome. The row lock makes the pair atomic against the leader's re-arm and a
 * concurrent cancel. The failed attempt joins the job's error history (appendError keeps the last
 * ERRORS_KEPT entries).
 *
 * A nack may instead give the job back (`giveBack`: a worker shutting down hands back what it has not
 * finished): the job is ready again at once, in its old place in claim order, and the attempt is not
 * counted, as if this claim never happened (claim/release.ts does the same for a claim whose client
 * went away): attempts - 1, no error recorded, claimed_at and worker_id cleared. So a deploy neither
 * makes jobs wait out their leases nor uses up their attempts; a job on its last attempt given back
 * is not sent to dead. Its unique key is settled as for any retry.
 *
 * A nack may carry the worker's progress (how far the failed attempt got), kept on the job wherever
 * it goes; without it, each statement is the one it always was and the job keeps what it has.
 */

export interface NackInput extends ScopedId {
  leaseToken: string;
  error?: { message: string; details?: unknown };
  retryInMs?: number;
  dead?: boolean;
  /** The worker's progress as JSON text ('null' clears it); undefined keeps what the job has. */
  progressJson?: string;
  /**
   * With a retry at once (retryInMs 0): keep the job's run_at, so it takes its old place in claim
   * order (priority, run_at, id) instead of going behind the jobs that became ready since. The SQS
   * endpoint sets it for FIFO queues, where a message made visible again (ChangeMessageVisibility
   * to 0) must be received before its group's later messages, exactly as when its visibility
   * timeout runs out (the leader's re-arm keeps run_at too). Without it, a job retried at once is
   * due from now: a worker that gives a job back goes to the end of the line, which is what a
   * plain queue wants.
   */
  keepPlace?: boolean;
  /**
   * Give the job back uncounted (a worker stopping): ready at once in its place, attempts - 1, no
   * error. The caller refuses it with `error`, `dead` or `retryInMs` (routes/jobs.ts).
   */
  giveBack?: boolean;
}

export interface NackResult {
  job: JobRow;
  /** True when the job is claimable again right now (wake waiting claimers). */
  readyNow: boolean;
}

interface LockedRow {
  slot: number;
  queue: string;
  unique_key: string | null;
  attempts: number;
  max_attempts: number;
  worker_id: string | null;
  now: Date;
  backoff_base_ms: number | null;
  backoff_max_ms: number | null;
  backoff_jitter: boolean | null;
}

export async function nackJob(
  db: Db,
  input: NackInput,
  defaults: QueueDefaults,
): Promise<LeaseOutcome<NackResult>> {
  const result = await retryWhenMoved(() =>
    db.transaction().execute((trx) => nackInTransaction(trx, input, defaults)),
  );
  return (await outcomesOf(db, [input], new Map(result ? [[input.id, result]] : [])))[0]!;
}

async function nackInTransaction(
  trx: Db,
  input: NackInput,
  defaults: QueueDefaults,
): Promise<NackResult | undefined> {
  // In the slot of its id, or (carried by the leader, ring.ts) in any slot.
  const lock = (where: RawBuilder<unknown>) =>
    sql<LockedRow>`
    SELECT j.slot, j.queue, j.unique_key, j.attempts, j.max_attempts, j.worker_id, now() AS now,
           q.backoff_base_ms, q.backoff_max_ms, q.backoff_jitter
    FROM baton.jobs j LEFT JOIN baton.queues q ON q.name = j.queue
    WHERE ${where} AND j.id = ${input.id} AND j.state = 'claimed' AND j.lease_token = ${input.leaseToken}::uuid
      AND ${inScope('j', sql`${input.queue ?? null}::text`)}
    FOR UPDATE OF j`.execute(trx);
  const locked =
    (await lock(inSlotOf('j', sql`${input.id}::bigint`))).rows[0] ?? (await lock(anySlot)).rows[0];
  if (!locked) return undefined;
  const thisRow = sql`id = ${input.id} AND slot = ${locked.slot}`;
  // Left on the job wherever the nack moves it: its receipt (nackReceipt below).
  const receipt = sql`${input.leaseToken}::uuid`;

  const entry: JobErrorEntry = {
    attempt: locked.attempts,
    at: locked.now.toISOString(),
    message: input.error?.message ?? 'nacked without an error message',
    ...(input.error?.details !== undefined ? { details: input.error.details } : {}),
    worker_id: locked.worker_id,
  };
  const lastError = sql`${JSON.stringify(entry)}::jsonb`;
  const progress =
    input.progressJson === undefined ? undefined : sql`nullif(${input.progressJson}::jsonb, 'null'::jsonb)`;

  if (input.giveBack) {
    // Claimable again at once, in place (run_at kept), and uncounted: the claim's increment undone.
    const given = await sql<JobRow>`
      UPDATE baton.jobs j SET state = 'ready', attempts = j.attempts - 1, ${clearedLease}, claimed_at = NULL,
             worker_id = NULL, nacked_token = ${receipt}${progress ? sql`, progress = ${progress}` : sql``}
      WHERE ${thisRow}
      RETURNING ${liveJobColumns}`.execute(trx);
    return settled(trx, locked, { job: given.rows[0]!, readyNow: true });
  }

  const deadReason: DeadReason | undefined = input.dead
    ? 'nacked_dead'
    : locked.attempts >= locked.max_attempts
      ? 'attempts_exhausted'
      : undefined;

  if (deadReason) {
    const row = finishedRow('dead', {
      deadReason: sql`${deadReason}`,
      lastError,
      errors: appendError(sql`errors`, lastError),
      progress,
      nackedToken: receipt,
    });
    const dead = await sql<JobRow>`
      WITH gone AS (DELETE FROM baton.jobs WHERE ${thisRow} RETURNING *)
      INSERT INTO baton.job_history AS h (${row.columns})
      SELECT ${row.values} FROM gone
      RETURNING ${finishedJobColumns}`.execute(trx);
    return { job: dead.rows[0]!, readyNow: false };
  }

  const delayMs =
    input.retryInMs ?? retryDelayMs(locked.attempts, effectiveSettings(locked, defaults).backoff);
  if (delayMs === 0) {
    // Claimable again at once: it stays in its slot of the ring.
    const retried = await sql<JobRow>`
      UPDATE baton.jobs j SET state = 'ready', run_at = ${input.keepPlace ? sql`j.run_at` : sql`now()`}, ${clearedLease},
             last_error = ${lastError}, errors = ${appendError(sql`j.errors`, lastError)}, nacked_token = ${receipt}${
               progress ? sql`, progress = ${progress}` : sql``
             }
      WHERE ${thisRow}
      RETURNING ${liveJobColumns}`.execute(trx);
    return settled(trx, locked, { job: retried.rows[0]!, readyNow: true });
  }
  // A retry later waits in baton.scheduled_jobs, out of the ring, until the promoter moves it back.
  const later = await sql<JobRow>`
    WITH gone AS (DELETE FROM baton.jobs WHERE ${thisRow} RETURNING *)
    INSERT INTO baton.scheduled_jobs AS s (${carriedColumns}, run_at, attempts, claimed_at, worker_id, last_error,
                                           errors)
    SELECT ${carriedValues({ nacked_token: receipt, ...(progress ? { progress } : {}) })}, now() + ${delayMs}::bigint * interval '1 millisecond', attempts, claimed_at, worker_id,
           ${lastError}, ${appendError(sql`errors`, lastError)}
    FROM gone
    RETURNING ${scheduledJobColumns}`.execute(trx);
  return settled(trx, locked, { job: later.rows[0]!, readyNow: false });
}

/**
 * A retry of a job with a unique key takes the key back, or gives way to a newer job holding it
 * (unique-return.ts): then the nack answers the job as it ended, cancelled. Nothing for a job
 * without a key.
 */
async function settled(trx: Db, locked: LockedRow, retried: NackResult): Promise<NackResult> {
  if (locked.unique_key === null) return retried;
  const id = retried.job.id;
  const gaveWay = await settleReturnedKeys(trx, [{ id, queue: locked.queue, unique_key: locked.unique_key }]);
  if (gaveWay.length === 0) return retried;
  const ended = await sql<JobRow>`
    SELECT ${finishedJobColumns} FROM baton.job_history h WHERE h.id = ${id}`.execute(trx);
  return { job: ended.rows[0]!, readyNow: false };
}

/**
 * The job a nack under this lease token moved, as it is now, if that nack committed; undefined if
 * not. For a nack whose connection was lost before its answer (service/leases.ts): the token it left
 * on the job (migrations/0020_nack_receipts.ts) says it happened, wherever the job went since (ready,
 * scheduled, dead in history, or claimed and finished again). Scoped like the nack itself.
 */
export async function nackReceipt(db: Db, input: NackInput): Promise<NackResult | undefined> {
  const token = sql`${input.leaseToken}::uuid`;
  const scope = sql`${input.queue ?? null}::text`;
  const { rows } = await sql<JobRow>`
    SELECT ${liveJobColumns} FROM baton.jobs j
    WHERE j.id = ${input.id} AND j.nacked_token = ${token} AND ${inScope('j', scope)}
    UNION ALL
    SELECT ${scheduledJobColumns} FROM baton.scheduled_jobs s
    WHERE s.id = ${input.id} AND s.nacked_token = ${token} AND ${inScope('s', scope)}
    UNION ALL
    SELECT ${finishedJobColumns} FROM baton.job_history h
    WHERE h.id = ${input.id} AND h.nacked_token = ${token} AND ${inScope('h', scope)}
    LIMIT 1`.execute(db);
  const job = rows[0];
  return job && { job, readyNow: job.state === 'ready' };
}
