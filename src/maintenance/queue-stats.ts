import { sql } from 'kysely';
import type { Db } from '../db/database.js';
import type { Duty } from './duty.js';

/**
 * Queue statistics: the leader counts each queue's jobs into baton.queue_stats, so that stats
 * reads, queue lists and metric scrapes read one small row per queue and never count rows
 * themselves. These are maintained counts, exact as of their refreshed_at:
 * - live counts (scheduled, ready, claimed), the oldest ready job and the last minute's completions
 *   every tick, each an index range count per queue on the partial indexes;
 * - finished counts (completed, dead, cancelled within retention) every `finishedEveryMs`, since they
 *   scan the history index of each queue and change slowly relative to their size.
 */

export async function refreshLiveStats(db: Db): Promise<number> {
  const result = await sql`
    INSERT INTO baton.queue_stats AS s (queue, scheduled, ready, claimed, oldest_ready_at, completed_last_minute,
                                        live_refreshed_at)
    SELECT q.name,
      (SELECT count(*) FROM baton.jobs j WHERE j.queue = q.name AND j.state = 'scheduled'),
      (SELECT count(*) FROM baton.jobs j WHERE j.queue = q.name AND j.state = 'ready'),
      (SELECT count(*) FROM baton.jobs j WHERE j.queue = q.name AND j.state = 'claimed'),
      (SELECT min(j.run_at) FROM baton.jobs j WHERE j.queue = q.name AND j.state = 'ready'),
      (SELECT count(*) FROM baton.job_history h
        WHERE h.queue = q.name AND h.state = 'completed' AND h.finished_at > now() - interval '1 minute'),
      now()
    FROM baton.queues q
    ON CONFLICT (queue) DO UPDATE SET
      scheduled = excluded.scheduled, ready = excluded.ready, claimed = excluded.claimed,
      oldest_ready_at = excluded.oldest_ready_at, completed_last_minute = excluded.completed_last_minute,
      live_refreshed_at = excluded.live_refreshed_at`.execute(db);
  await sql`
    DELETE FROM baton.queue_stats s WHERE NOT EXISTS (SELECT 1 FROM baton.queues q WHERE q.name = s.queue)`.execute(
    db,
  );
  return Number(result.numAffectedRows ?? 0);
}

/** `all`: every queue; otherwise only queues never counted yet (new since the last full count). */
export async function refreshFinishedStats(db: Db, all = true): Promise<number> {
  const result = await sql`
    UPDATE baton.queue_stats s SET
      completed = c.completed, dead = c.dead, cancelled = c.cancelled, finished_refreshed_at = now()
    FROM (
      SELECT q.name,
        (SELECT count(*) FROM baton.job_history h WHERE h.queue = q.name AND h.state = 'completed') AS completed,
        (SELECT count(*) FROM baton.job_history h WHERE h.queue = q.name AND h.state = 'dead') AS dead,
        (SELECT count(*) FROM baton.job_history h WHERE h.queue = q.name AND h.state = 'cancelled') AS cancelled
      FROM baton.queues q JOIN baton.queue_stats counted ON counted.queue = q.name
      WHERE ${all} OR counted.finished_refreshed_at IS NULL
    ) c
    WHERE s.queue = c.name`.execute(db);
  return Number(result.numAffectedRows ?? 0);
}

export class QueueStatsDuty implements Duty<{ queues: number; finished: boolean }> {
  readonly name = 'queue_stats';
  private lastFinished = 0;

  constructor(
    private readonly db: Db,
    private readonly tickMs: number,
    private readonly finishedEveryMs = 60_000,
  ) {}

  async runOnce(): Promise<{ queues: number; finished: boolean }> {
    const queues = await refreshLiveStats(this.db);
    const due = Date.now() - this.lastFinished >= this.finishedEveryMs;
    await refreshFinishedStats(this.db, due);
    if (due) this.lastFinished = Date.now();
    return { queues, finished: due };
  }

  nextRunInMs(): number {
    return this.tickMs;
  }
}
