import { sql } from 'kysely';
import type { Db } from '../db/database.js';
import type { Duty } from './duty.js';

/**
 * Queue statistics: the leader counts each queue's jobs into baton.queue_stats, so that stats
 * reads, queue lists and metric scrapes read one small row per queue and never count rows
 * themselves. These are maintained counts, exact as of their refreshed_at:
 * - live counts (scheduled, ready, claimed), the oldest ready job, the last minute's completions and
 *   the failing jobs (live, their last attempt failed), each an index range count per queue on the
 *   partial indexes;
 * - finished counts (completed, dead, cancelled within retention) at most once a minute per queue,
 *   since they scan the history index of each queue and change slowly relative to their size.
 *
 * Work per tick is bounded: a tick counts at most `batchSize` queues, in name order from where the
 * last tick stopped, so ten thousand queues cost the leader the same per tick as five hundred (their
 * counts are then refreshed every few ticks instead of every tick).
 */

export const STATS_BATCH = 500;

/** Live counts of the next `limit` queues after `after` (by name); answers the names counted. */
export async function refreshLiveStats(
  db: Db,
  opts: { after?: string; limit?: number; only?: string[] } = {},
): Promise<string[]> {
  // The ring (ready and claimed jobs) is counted in one pass, grouped by queue: it has no index on
  // claimed rows, and it is small by design. Scheduled and finished jobs are counted per queue on
  // their indexes.
  const { rows } = await sql<{ queue: string }>`
    WITH batch AS (
      SELECT name FROM baton.queues WHERE name > ${opts.after ?? ''}
        ${opts.only === undefined ? sql`` : sql`AND name = ANY(${opts.only}::text[])`}
      ORDER BY name LIMIT ${opts.limit ?? STATS_BATCH}
    ), ring AS (
      SELECT j.queue, count(*) FILTER (WHERE j.state = 'ready') AS ready,
             count(*) FILTER (WHERE j.state = 'claimed') AS claimed,
             min(j.run_at) FILTER (WHERE j.state = 'ready') AS oldest_ready_at,
             count(*) FILTER (WHERE j.last_error IS NOT NULL) AS failing
      FROM baton.jobs j WHERE j.queue IN (SELECT name FROM batch) GROUP BY j.queue
    )
    INSERT INTO baton.queue_stats AS s (queue, waiting, scheduled, ready, claimed, oldest_ready_at,
                                        completed_last_minute, failing, live_refreshed_at)
    SELECT b.name,
      (SELECT count(*) FROM baton.waiting_jobs w WHERE w.queue = b.name),
      sj.scheduled,
      coalesce(r.ready, 0), coalesce(r.claimed, 0), r.oldest_ready_at,
      (SELECT count(*) FROM baton.job_history h
        WHERE h.queue = b.name AND h.state = 'completed' AND h.finished_at > now() - interval '1 minute'),
      -- Failing: the live jobs whose last attempt failed, ready or claimed again, or waiting for a retry.
      coalesce(r.failing, 0) + sj.retrying,
      now()
    FROM batch b LEFT JOIN ring r ON r.queue = b.name
    CROSS JOIN LATERAL (
      SELECT count(*) AS scheduled, count(*) FILTER (WHERE last_error IS NOT NULL) AS retrying
      FROM baton.scheduled_jobs WHERE queue = b.name
    ) sj
    ON CONFLICT (queue) DO UPDATE SET
      waiting = excluded.waiting, scheduled = excluded.scheduled, ready = excluded.ready, claimed = excluded.claimed,
      oldest_ready_at = excluded.oldest_ready_at, completed_last_minute = excluded.completed_last_minute,
      failing = excluded.failing, live_refreshed_at = excluded.live_refreshed_at
    RETURNING queue`.execute(db);
  return rows.map((r) => r.queue).sort();
}

/** Rows of queues that no longer exist. */
export async function dropStatsOfGoneQueues(db: Db): Promise<number> {
  const result = await sql`
    DELETE FROM baton.queue_stats s WHERE NOT EXISTS (SELECT 1 FROM baton.queues q WHERE q.name = s.queue)`.execute(
    db,
  );
  return Number(result.numAffectedRows ?? 0);
}

/**
 * Finished counts of these queues (every queue when `queues` is undefined), skipping those counted
 * less than `olderThanMs` ago.
 */
export async function refreshFinishedStats(
  db: Db,
  opts: { queues?: string[]; olderThanMs?: number } = {},
): Promise<number> {
  const result = await sql`
    UPDATE baton.queue_stats s SET
      completed = c.completed, dead = c.dead, cancelled = c.cancelled, finished_refreshed_at = now()
    FROM (
      SELECT q.name,
        (SELECT count(*) FROM baton.job_history h WHERE h.queue = q.name AND h.state = 'completed') AS completed,
        (SELECT count(*) FROM baton.job_history h WHERE h.queue = q.name AND h.state = 'dead') AS dead,
        (SELECT count(*) FROM baton.job_history h WHERE h.queue = q.name AND h.state = 'cancelled') AS cancelled
      FROM baton.queues q JOIN baton.queue_stats counted ON counted.queue = q.name
      WHERE (${opts.queues ?? null}::text[] IS NULL OR q.name = ANY(${opts.queues ?? null}::text[]))
        AND (counted.finished_refreshed_at IS NULL
             OR counted.finished_refreshed_at <= now() - ${opts.olderThanMs ?? 0}::bigint * interval '1 millisecond')
    ) c
    WHERE s.queue = c.name`.execute(db);
  return Number(result.numAffectedRows ?? 0);
}

export class QueueStatsDuty implements Duty<{ queues: number; finished: number }> {
  readonly name = 'queue_stats';
  /** The last queue counted; the next tick continues after it. */
  private after: string | undefined;

  constructor(
    private readonly db: Db,
    private readonly tickMs: number,
    private readonly finishedEveryMs = 60_000,
    private readonly batchSize = STATS_BATCH,
  ) {}

  async runOnce(): Promise<{ queues: number; finished: number }> {
    const counted = await refreshLiveStats(this.db, { after: this.after, limit: this.batchSize });
    // A short batch reached the end of the queue list: start from the first queue next tick.
    this.after = counted.length < this.batchSize ? undefined : counted.at(-1);
    if (this.after === undefined) await dropStatsOfGoneQueues(this.db);
    const finished =
      counted.length === 0
        ? 0
        : await refreshFinishedStats(this.db, { queues: counted, olderThanMs: this.finishedEveryMs });
    return { queues: counted.length, finished };
  }

  nextRunInMs(): number {
    return this.tickMs;
  }
}
