import { sql } from 'kysely';
import type { Db } from '../db/database.js';
import { RATE_PERIOD_MS_MAX } from '../jobs/limits.js';
import type { Duty } from './duty.js';

/**
 * Group statistics and flow-control upkeep, for the groups API (busiest first) and the dashboard.
 * Each run takes the next `batchSize` queues by name (like queue_stats, so many queues cost the
 * same per run) and:
 *
 * - counts the ready, claimed and scheduled jobs of each group of the grouped ones into
 *   baton.group_stats, rewriting a row only when its counts changed (ten thousand idle groups
 *   cost no writes), dropping rows of groups that have no jobs left and no overrides, and stamping
 *   queue_stats.groups_refreshed_at;
 * - marks a queue grouped if it has ready jobs with a group but is not marked: the enqueue that
 *   marks it skips the mark when the queue row is locked at that moment, and this catches it;
 * - drops rate windows of groups whose last claim left every possible period (one day) ago.
 */

export const GROUP_STATS_BATCH = 200;
export const GROUP_STATS_EVERY_MS = 5000;

export interface GroupStatsResult {
  queues: number;
  /** Group rows written or dropped. */
  changed: number;
  /** Queues found with grouped jobs but not marked grouped. */
  marked: number;
}

export async function refreshGroupStats(
  db: Db,
  opts: { after?: string; limit?: number } = {},
): Promise<GroupStatsResult & { last?: string }> {
  const { rows } = await sql<{ name: string; grouped: boolean; marked: boolean; changed: number }>`
    WITH batch AS (
      SELECT name, grouped FROM baton.queues WHERE name > ${opts.after ?? ''} ORDER BY name
      LIMIT ${opts.limit ?? GROUP_STATS_BATCH}
    ), marked AS (
      -- One probe of jobs_group_ready_idx per unmarked queue: the first ready job with a group.
      UPDATE baton.queues q SET grouped = true
      FROM batch b
      WHERE q.name = b.name AND NOT b.grouped
        AND EXISTS (SELECT 1 FROM baton.jobs j WHERE j.queue = b.name AND j.state = 'ready' AND j.group_key > '')
      RETURNING q.name
    ), counts AS (
      SELECT queue, group_key, sum(ready)::bigint AS ready, sum(claimed)::bigint AS claimed,
             sum(scheduled)::bigint AS scheduled
      FROM (
        SELECT j.queue, j.group_key, count(*) FILTER (WHERE j.state = 'ready') AS ready,
               count(*) FILTER (WHERE j.state = 'claimed') AS claimed, 0 AS scheduled
        FROM baton.jobs j WHERE j.queue IN (SELECT name FROM batch WHERE grouped) GROUP BY 1, 2
        UNION ALL
        SELECT s.queue, s.group_key, 0, 0, count(*)
        FROM baton.scheduled_jobs s WHERE s.queue IN (SELECT name FROM batch WHERE grouped) GROUP BY 1, 2
        UNION ALL
        SELECT o.queue, o.group_key, 0, 0, 0 FROM baton.queue_groups o WHERE o.queue IN (SELECT name FROM batch)
      ) c
      GROUP BY 1, 2
    ), written AS (
      INSERT INTO baton.group_stats AS g (queue, group_key, ready, claimed, scheduled)
      SELECT queue, group_key, ready, claimed, scheduled FROM counts
      ON CONFLICT (queue, group_key) DO UPDATE SET
        ready = excluded.ready, claimed = excluded.claimed, scheduled = excluded.scheduled
      WHERE (g.ready, g.claimed, g.scheduled) IS DISTINCT FROM (excluded.ready, excluded.claimed, excluded.scheduled)
      RETURNING g.queue
    ), dropped AS (
      DELETE FROM baton.group_stats g
      WHERE g.queue IN (SELECT name FROM batch)
        AND NOT EXISTS (SELECT 1 FROM counts c WHERE c.queue = g.queue AND c.group_key = g.group_key)
      RETURNING g.queue
    ), stamped AS (
      -- A queue not yet counted by queue_stats gets its row here (zero counts, live_refreshed_at null).
      INSERT INTO baton.queue_stats AS s (queue, groups_refreshed_at)
      SELECT name, now() FROM batch WHERE grouped
      ON CONFLICT (queue) DO UPDATE SET groups_refreshed_at = excluded.groups_refreshed_at
    )
    SELECT b.name, b.grouped, EXISTS (SELECT 1 FROM marked m WHERE m.name = b.name) AS marked,
           ((SELECT count(*) FROM written w WHERE w.queue = b.name)
            + (SELECT count(*) FROM dropped d WHERE d.queue = b.name))::int AS changed
    FROM batch b ORDER BY b.name`.execute(db);
  return {
    queues: rows.length,
    changed: rows.reduce((n, r) => n + r.changed, 0),
    marked: rows.filter((r) => r.marked).length,
    last: rows.at(-1)?.name,
  };
}

/** Rate windows of groups that nothing has claimed from for longer than any period. */
export async function dropIdleRateWindows(db: Db): Promise<number> {
  const result = await sql`
    DELETE FROM baton.flow_state
    WHERE NOT is_queue
      AND coalesce(claim_times[array_upper(claim_times, 1)], '-infinity')
          < now() - ${RATE_PERIOD_MS_MAX}::bigint * interval '1 millisecond'`.execute(db);
  return Number(result.numAffectedRows ?? 0);
}

export class GroupStatsDuty implements Duty<GroupStatsResult> {
  readonly name = 'group_stats';
  private after: string | undefined;

  constructor(
    private readonly db: Db,
    private readonly everyMs = GROUP_STATS_EVERY_MS,
    private readonly batchSize = GROUP_STATS_BATCH,
  ) {}

  async runOnce(): Promise<GroupStatsResult> {
    const { last, ...result } = await refreshGroupStats(this.db, {
      after: this.after,
      limit: this.batchSize,
    });
    // A short batch reached the end of the queue list: the next run starts from the first queue.
    this.after = result.queues < this.batchSize ? undefined : last;
    if (this.after === undefined) await dropIdleRateWindows(this.db);
    return result;
  }

  nextRunInMs(last: GroupStatsResult | undefined): number {
    // More queues to go: carry on soon rather than a whole period later.
    return this.after !== undefined && last ? 100 : this.everyMs;
  }
}
