import { type RawBuilder, sql } from 'kysely';
import type { Db } from '../db/database.js';
import { isoMillis } from '../db/sql-time.js';
import { removeStaleUniqueKeys, type UniqueKeyCursor } from '../jobs/enqueue/unique-keys.js';
import { appendError, finishedRow } from '../jobs/job-row.js';
import type { Metrics } from '../metrics/metrics.js';
import { type Duty, type JobsFinished, MAINTENANCE_BATCH } from './duty.js';

/**
 * Expiry: waiting jobs (ready or scheduled) past their expires_at go to `dead` with reason
 * `expired` and an error history entry saying so. Claims already skip them (job-row.ts,
 * notExpired), so this sweep only files them where users look for them; a claim never hands one out,
 * swept or not.
 *
 * Race-free like the re-arm: rows are picked FOR UPDATE SKIP LOCKED (a claim holding a row is left
 * to it; a claim that comes later skips the row this sweep holds), and the delete re-checks the state
 * and expiry on the row's newest version, so a job claimed just before the sweep stays claimed.
 * The ring is read whole (it is small by design, as for the re-arm); expiring scheduled jobs are
 * found through scheduled_jobs_expires_idx. At most `batchSize` jobs per table per call.
 *
 * The same duty removes stale unique-key rows (jobs/unique.ts), a bounded slice per call.
 */

export interface ExpiryResult {
  /** Jobs moved to dead, by queue. */
  expired: Map<string, number>;
  total: number;
  /** Unique-key rows removed because their job no longer waits. */
  staleKeys: number;
  /** A batch came back full: run again at once. */
  more: boolean;
}

const entry = sql`jsonb_build_object('attempt', attempts, 'at', ${isoMillis(sql`now()`)},
  'message', 'expired: not claimed by expires_at', 'reason', 'expired')`;

const expiredRow = finishedRow('dead', {
  deadReason: sql`'expired'`,
  lastError: sql`entry`,
  errors: appendError(sql`errors`, sql`entry`),
});

function sweep(db: Db, picked: RawBuilder<unknown>, remove: RawBuilder<unknown>) {
  return sql<{ queue: string; n: number; ids: string[] }>`
    WITH picked AS (${picked}), gone AS (${remove}), buried AS (
      INSERT INTO baton.job_history (${expiredRow.columns})
      SELECT ${expiredRow.values} FROM gone
      RETURNING queue, id
    )
    SELECT queue, count(*)::int AS n, array_agg(id::text) AS ids FROM buried GROUP BY queue`.execute(db);
}

export async function expireJobs(
  db: Db,
  batchSize: number,
): Promise<{ byQueue: Map<string, number>; ids: string[]; full: boolean }> {
  const ring = await sweep(
    db,
    sql`SELECT slot, id FROM baton.jobs WHERE state = 'ready' AND expires_at <= now()
        LIMIT ${batchSize} FOR UPDATE SKIP LOCKED`,
    sql`DELETE FROM baton.jobs j USING picked p
        WHERE j.slot = p.slot AND j.id = p.id AND j.state = 'ready' AND j.expires_at <= now()
        RETURNING j.*, ${entry} AS entry`,
  );
  const later = await sweep(
    db,
    sql`SELECT id FROM baton.scheduled_jobs WHERE expires_at <= now()
        ORDER BY expires_at LIMIT ${batchSize} FOR UPDATE SKIP LOCKED`,
    sql`DELETE FROM baton.scheduled_jobs s USING picked p WHERE s.id = p.id AND s.expires_at <= now()
        RETURNING s.*, ${entry} AS entry`,
  );
  const byQueue = new Map<string, number>();
  const ids = [...ring.rows, ...later.rows].flatMap((r) => r.ids);
  let ringTotal = 0;
  let laterTotal = 0;
  for (const r of ring.rows) {
    byQueue.set(r.queue, r.n);
    ringTotal += r.n;
  }
  for (const r of later.rows) {
    byQueue.set(r.queue, (byQueue.get(r.queue) ?? 0) + r.n);
    laterTotal += r.n;
  }
  return { byQueue, ids, full: ringTotal >= batchSize || laterTotal >= batchSize };
}

/** The expiry duty: every tick, and again at once while a batch comes back full. */
export class ExpiryDuty implements Duty<ExpiryResult> {
  readonly name = 'expiry';
  private keyCursor: UniqueKeyCursor | undefined;

  constructor(
    private readonly db: Db,
    private readonly metrics: Metrics,
    private readonly tickMs: number,
    private readonly batchSize = MAINTENANCE_BATCH,
    private readonly jobsFinished: JobsFinished = () => {},
  ) {}

  async runOnce(): Promise<ExpiryResult> {
    const { byQueue, ids, full } = await expireJobs(this.db, this.batchSize);
    if (ids.length > 0) this.jobsFinished(ids);
    let total = 0;
    for (const [queue, n] of byQueue) {
      this.metrics.jobsExpired.inc({ queue: this.metrics.queue(queue) }, n);
      total += n;
    }
    const keys = await removeStaleUniqueKeys(this.db, this.keyCursor, this.batchSize);
    this.keyCursor = keys.next;
    return { expired: byQueue, total, staleKeys: keys.removed, more: full };
  }

  nextRunInMs(last: ExpiryResult | undefined): number {
    return last?.more ? 0 : this.tickMs;
  }
}
