import { sql } from 'kysely';
import type { Db } from '../db/database.js';
import { queueVisible } from '../db/queue-patterns.js';

/** The whole system at a glance (GET /v1/overview): what the leader already counts, summed. */
export interface OverviewRows {
  now: Date;
  totals: {
    queues: number;
    paused: number;
    waiting: number;
    scheduled: number;
    ready: number;
    claimed: number;
    dead: number;
    failing: number;
    /** The latest of the queues' live counts (live_refreshed_at): how fresh all but `dead` are. */
    counted_at: Date | null;
    /**
     * The latest of the queues' finished counts (finished_refreshed_at): how fresh `dead` is. Those
     * counts scan each queue's history, so the leader takes them once a minute, not every tick.
     */
    finished_counted_at: Date | null;
  };
  /** The last hour, minute by minute, oldest first: only minutes some queue sampled. */
  minutes: { minute: Date; enqueued: number; completed: number; failed: number; attempts_failed: number }[];
  attention: {
    queue: string;
    paused: boolean;
    dead: number;
    failed_last_hour: number;
    attempts_failed_last_hour: number;
    failing: number;
    oldest_ready_age_ms: number | null;
  }[];
}

/** How long the oldest ready job may wait before its queue needs attention. */
export const LAGGING_MS = 60_000;
const ATTENTION_MAX = 10;

/**
 * Three reads, none over jobs: the sums of baton.queue_stats (one row per queue, kept by the leader),
 * the last hour of baton.queue_history by minute (its minute index), and the queues that need
 * attention first (jobs failed in the last hour, then attempts failed in the last hour, then dead
 * jobs, then failing jobs, then the oldest ready job's age, then paused). With `patterns` (a queue-limited key), only the queues they match, in each query.
 */
export async function readOverview(db: Db, patterns?: string[]): Promise<OverviewRows> {
  const scope = (column: string) => queueVisible(column, patterns);
  const [totals, minutes, attention] = await Promise.all([
    sql<OverviewRows['totals'] & { now: Date }>`
      SELECT now() AS now, count(*)::int AS queues, count(*) FILTER (WHERE q.paused)::int AS paused,
             coalesce(sum(s.waiting), 0)::float8 AS waiting, coalesce(sum(s.scheduled), 0)::float8 AS scheduled,
             coalesce(sum(s.ready), 0)::float8 AS ready, coalesce(sum(s.claimed), 0)::float8 AS claimed,
             coalesce(sum(s.dead), 0)::float8 AS dead, coalesce(sum(s.failing), 0)::float8 AS failing,
             max(s.live_refreshed_at) AS counted_at,
             max(s.finished_refreshed_at) AS finished_counted_at
      FROM baton.queues q LEFT JOIN baton.queue_stats s ON s.queue = q.name
      WHERE ${scope('q.name')}`.execute(db),
    sql<OverviewRows['minutes'][number]>`
      SELECT h.minute, coalesce(sum(h.enqueued), 0)::float8 AS enqueued,
             sum(h.completed)::float8 AS completed, sum(h.dead)::float8 AS failed,
             coalesce(sum(h.attempts_failed), 0)::float8 AS attempts_failed
      FROM baton.queue_history h
      WHERE h.minute >= date_trunc('minute', now()) - interval '59 minutes' AND ${scope('h.queue')}
      GROUP BY h.minute ORDER BY h.minute`.execute(db),
    // Per queue, its hour by its own index range (queue, minute): the request pool plans no hash
    // joins, and a join of two lists of every queue would compare each with each.
    sql<OverviewRows['attention'][number]>`
      SELECT * FROM (
        SELECT q.name AS queue, q.paused, coalesce(s.dead, 0)::float8 AS dead,
               coalesce(s.failing, 0)::float8 AS failing, hour.failed_last_hour, hour.attempts_failed_last_hour,
               (extract(epoch FROM (s.live_refreshed_at - s.oldest_ready_at)) * 1000)::float8 AS oldest_ready_age_ms
        FROM baton.queues q LEFT JOIN baton.queue_stats s ON s.queue = q.name
        CROSS JOIN LATERAL (
          SELECT coalesce(sum(h.dead), 0)::float8 AS failed_last_hour,
                 coalesce(sum(h.attempts_failed), 0)::float8 AS attempts_failed_last_hour
          FROM baton.queue_history h
          WHERE h.queue = q.name AND h.minute >= date_trunc('minute', now()) - interval '59 minutes'
        ) hour
        WHERE ${scope('q.name')}
      ) x
      WHERE failed_last_hour > 0 OR attempts_failed_last_hour > 0 OR dead > 0 OR failing > 0 OR paused
        OR oldest_ready_age_ms > ${LAGGING_MS}
      ORDER BY failed_last_hour DESC, attempts_failed_last_hour DESC, dead DESC, failing DESC,
               oldest_ready_age_ms DESC NULLS LAST, queue
      LIMIT ${ATTENTION_MAX}`.execute(db),
  ]);
  const { now, ...sums } = totals.rows[0]!;
  return { now, totals: sums, minutes: minutes.rows, attention: attention.rows };
}
