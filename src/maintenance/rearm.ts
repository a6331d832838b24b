import { sql } from 'kysely';
import type { Db } from '../db/database.js';
import { isoMillis } from '../db/sql-time.js';
import { appendError, clearedLease, finishedRow } from '../jobs/job-row.js';
import { type ReturnedJob, settleReturnedKeys } from '../jobs/unique-return.js';
import type { Metrics } from '../metrics/metrics.js';
import { type Duty, type JobsFinished, type JobsReady, MAINTENANCE_BATCH } from './duty.js';

/**
 * Re-arm: claimed jobs whose lease expired (the worker died, hung or lost its network) go back to
 * `ready`, or to `dead` with reason `lease_expired` when that was their last allowed attempt. An
 * expired lease counts as a failed attempt (attempts was counted at claim) and is recorded in the
 * job's error history, with `reason: lease_expired`.
 *
 * An attempt with a budget (timeout_ms) has its lease capped at its deadline_at (claim/statement.ts, renew.ts),
 * so this same sweep fails it at the deadline; it is told apart by the lease having run up to the
 * deadline, and recorded with `reason: deadline_exceeded` (the dead reason too, on a last attempt).
 *
 * Guarded against every race, so two leaders (or four reapers) running at once are harmless:
 * - the `expired` CTE locks the rows it picks FOR UPDATE SKIP LOCKED. A row that a worker is acking,
 *   renewing or nacking at this instant is locked by that worker and skipped; it is looked at again
 *   next tick if it is still expired then. Another reaper's rows are skipped the same way.
 * - after taking the lock PostgreSQL re-checks `state = 'claimed' AND lease_expires_at < now()` on
 *   the row's newest version, so a lease renewed (or a job acked) just before the lock is excluded;
 * - the writes match the lease token read in the CTE, so nothing re-claimed in between is touched.
 * Bounded: at most `batchSize` jobs per call; the leader calls again while batches come back full.
 */

export interface RearmResult {
  /** Jobs back to ready, by queue (for waking waiting claimers). */
  ready: Map<string, number>;
  /** Jobs dead-lettered with reason lease_expired, by queue. */
  dead: Map<string, number>;
  /** The ids of the jobs that went dead (their awaiters are told). */
  deadIds: string[];
  total: number;
}

/** A job dead on an expired lease (or deadline): the reason, and the expiry as its last error. */
const buried = finishedRow('dead', {
  deadReason: sql`reason`,
  lastError: sql`entry`,
  errors: appendError(sql`errors`, sql`entry`),
});

export async function rearmExpiredLeases(db: Db, batchSize: number): Promise<RearmResult> {
  // A transaction, for the jobs with unique keys: each takes its key back, or gives way to a newer
  // job holding it, before anyone sees it waiting (jobs/unique-return.ts).
  const inTransaction = (fn: (trx: Db) => Promise<RearmResult>) =>
    db.isTransaction ? fn(db) : db.transaction().execute(fn);
  return inTransaction(async (trx) => {
    const { rows } = await rearmStatement(trx, batchSize);
    const result: RearmResult = { ready: new Map(), dead: new Map(), deadIds: [], total: 0 };
    const keyed: ReturnedJob[] = [];
    for (const r of rows) {
      if (r.outcome === 'keyed') {
        keyed.push({ id: r.id!, queue: r.queue, unique_key: r.unique_key });
        continue;
      }
      if (r.outcome === 'dead') result.deadIds.push(...r.ids!);
      result[r.outcome].set(r.queue, r.n);
      result.total += r.n;
    }
    // Cancelled in favour of the job holding their key: not ready after all (counted as re-armed).
    for (const gone of await settleReturnedKeys(trx, keyed)) {
      result.ready.set(gone.queue, (result.ready.get(gone.queue) ?? 0) - 1);
    }
    return result;
  });
}

function rearmStatement(db: Db, batchSize: number) {
  return sql<{
    outcome: 'ready' | 'dead' | 'keyed';
    queue: string;
    n: number;
    id: string | null;
    unique_key: string | null;
    ids: string[] | null;
  }>`
    WITH expired AS (
      SELECT slot, id, lease_token FROM baton.jobs
      WHERE state = 'claimed' AND lease_expires_at < now()
      LIMIT ${batchSize}
      FOR UPDATE SKIP LOCKED
    ), reasons AS (
      -- The lease ran up to the attempt's deadline (claim and renew cap it there): the budget ran out.
      SELECT j.slot, j.id, j.attempts < j.max_attempts AS retry, j.attempts, j.worker_id,
             CASE WHEN j.deadline_at IS NOT NULL AND j.lease_expires_at >= j.deadline_at
                  THEN 'deadline_exceeded' ELSE 'lease_expired' END AS reason
      FROM baton.jobs j JOIN expired e ON e.slot = j.slot AND e.id = j.id AND e.lease_token = j.lease_token
    ), entries AS (
      SELECT r.slot, r.id, r.retry, r.reason,
             jsonb_build_object('attempt', r.attempts, 'at', ${isoMillis(sql`now()`)},
                                'message', CASE r.reason WHEN 'deadline_exceeded' THEN 'deadline exceeded'
                                                         ELSE 'lease expired' END,
                                'worker_id', r.worker_id, 'reason', r.reason) AS entry
      FROM reasons r
    ), back AS (
      UPDATE baton.jobs j SET state = 'ready', ${clearedLease},
             last_error = en.entry, errors = ${appendError(sql`j.errors`, sql`en.entry`)}
      FROM entries en
      WHERE j.slot = en.slot AND j.id = en.id AND en.retry
      RETURNING j.queue, j.id, j.unique_key
    ), gone AS (
      DELETE FROM baton.jobs j USING entries en
      WHERE j.slot = en.slot AND j.id = en.id AND NOT en.retry
      RETURNING j.*, en.entry, en.reason
    ), buried AS (
      INSERT INTO baton.job_history (${buried.columns})
      SELECT ${buried.values} FROM gone
      RETURNING queue, id
    )
    SELECT 'ready' AS outcome, queue, count(*)::int AS n, NULL::bigint AS id, NULL::text AS unique_key,
           NULL::text[] AS ids
    FROM back GROUP BY queue
    UNION ALL
    SELECT 'dead', queue, count(*)::int, NULL, NULL, array_agg(id::text) FROM buried GROUP BY queue
    UNION ALL
    SELECT 'keyed', queue, 1, id, unique_key, NULL FROM back WHERE unique_key IS NOT NULL`.execute(db);
}

/** Age in seconds of the oldest expired lease not yet re-armed (0 when none). */
export async function oldestExpiredLeaseSeconds(db: Db): Promise<number> {
  const { rows } = await sql<{ age: number | null }>`
    SELECT extract(epoch FROM now() - min(lease_expires_at))::float8 AS age
    FROM baton.jobs WHERE state = 'claimed' AND lease_expires_at < now()`.execute(db);
  return rows[0]?.age ?? 0;
}

/** The re-arm duty: runs every tick, and again at once while batches come back full. */
export class RearmDuty implements Duty<RearmResult> {
  readonly name = 'rearm';
  constructor(
    private readonly db: Db,
    private readonly metrics: Metrics,
    private readonly jobsReady: JobsReady,
    private readonly tickMs: number,
    private readonly batchSize = MAINTENANCE_BATCH,
    private readonly jobsFinished: JobsFinished = () => {},
  ) {}

  async runOnce(): Promise<RearmResult> {
    let result: RearmResult;
    try {
      result = await rearmExpiredLeases(this.db, this.batchSize);
    } catch (err) {
      this.metrics.rearmFailures.inc();
      throw err;
    }
    for (const [queue, n] of result.ready) {
      this.metrics.leasesRearmed.inc({ outcome: 'ready' }, n);
      this.jobsReady(queue, n);
    }
    for (const [queue, n] of result.dead) {
      this.metrics.leasesRearmed.inc({ outcome: 'dead' }, n);
      // Nothing new to claim, but each frees a slot of a concurrency limit: wake the queue's waiters.
      this.jobsReady(queue, n);
    }
    if (result.deadIds.length > 0) this.jobsFinished(result.deadIds);
    this.metrics.oldestExpiredLease.set(await oldestExpiredLeaseSeconds(this.db));
    return result;
  }

  nextRunInMs(last: RearmResult | undefined): number {
    return last && last.total >= this.batchSize ? 0 : this.tickMs;
  }
}
