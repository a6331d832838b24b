import { sql } from 'kysely';
import type { Db } from '../db/database.js';
import { carriedColumns, carriedValues } from '../jobs/job-row.js';
import type { Metrics } from '../metrics/metrics.js';
import { type Duty, type JobsReady, MAINTENANCE_BATCH } from './duty.js';

/**
 * Promote: scheduled jobs whose run_at has come become `ready`, so a delayed or backed-off job is
 * claimable within about one promote interval (default 500 ms) of its time.
 *
 * Scheduled jobs wait in baton.scheduled_jobs; promotion moves them into the ring of live jobs
 * (baton.jobs, in their id's slot), in one statement.
 *
 * Fair across queues: the LATERAL subquery takes at most `perQueue` due jobs from each queue (an
 * index range scan of scheduled_jobs_due_idx per queue), so a queue with a million due jobs cannot hold
 * back another queue's one. Every live job's queue has a row in baton.queues (enqueue inserts
 * through it and queue GC never removes a queue with live jobs), so walking that table finds them
 * all. FOR UPDATE SKIP LOCKED skips jobs another promoter (a second leader) or a cancel holds.
 */

export interface PromoteResult {
  promoted: number;
  byQueue: Map<string, number>;
  /** Some queue hit its per-queue cap: more may be due. */
  more: boolean;
}

export async function promoteDueJobs(db: Db, perQueue: number, total: number): Promise<PromoteResult> {
  const { rows } = await sql<{ queue: string; n: number }>`
    WITH due AS (
      SELECT d.id FROM baton.queues q
      CROSS JOIN LATERAL (
        SELECT s.id FROM baton.scheduled_jobs s
        WHERE s.queue = q.name AND s.run_at <= now()
        ORDER BY s.run_at
        LIMIT ${perQueue}
        FOR UPDATE SKIP LOCKED
      ) d
      LIMIT ${total}
    ), moved AS (
      DELETE FROM baton.scheduled_jobs s USING due WHERE s.id = due.id RETURNING s.*
    ), promoted AS (
      INSERT INTO baton.jobs (slot, ${carriedColumns}, state, run_at, attempts, claimed_at, worker_id, last_error,
                              errors)
      SELECT baton.job_slot(id), ${carriedValues()}, 'ready', run_at, attempts, claimed_at, worker_id, last_error,
             errors
      FROM moved
      RETURNING queue
    )
    SELECT queue, count(*)::int AS n FROM promoted GROUP BY queue`.execute(db);
  const byQueue = new Map(rows.map((r) => [r.queue, r.n]));
  const promoted = rows.reduce((sum, r) => sum + r.n, 0);
  return { promoted, byQueue, more: promoted >= total || rows.some((r) => r.n >= perQueue) };
}

export class PromoteDuty implements Duty<PromoteResult> {
  readonly name = 'promote';
  constructor(
    private readonly db: Db,
    private readonly metrics: Metrics,
    private readonly jobsReady: JobsReady,
    private readonly intervalMs: number,
    private readonly perQueue = MAINTENANCE_BATCH,
    private readonly total = 10 * MAINTENANCE_BATCH,
  ) {}

  async runOnce(): Promise<PromoteResult> {
    const result = await promoteDueJobs(this.db, this.perQueue, this.total);
    this.metrics.jobsPromoted.inc(result.promoted);
    for (const [queue, n] of result.byQueue) this.jobsReady(queue, n);
    return result;
  }

  nextRunInMs(last: PromoteResult | undefined): number {
    return last?.more ? 0 : this.intervalMs;
  }
}
