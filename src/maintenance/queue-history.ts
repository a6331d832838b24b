import { sql } from 'kysely';
import type { Db } from '../db/database.js';
import { HISTORY_MINUTES_MAX } from '../jobs/limits.js';
import type { Duty } from './duty.js';
import { STATS_BATCH } from './queue-stats.js';

/**
 * Queue history: once a minute the leader writes a sample per queue into baton.queue_history, for
 * the dashboard's charts (GET /v1/queues/{queue}/history). It adds no count over the live jobs: a
 * sample is built from what the queue-stats duty already keeps in baton.queue_stats, plus index
 * range counts of the jobs that finished since the queue's previous sample (the same kind of count
 * as the stats duty's completed_last_minute, on job_history's (queue, state, finished_at) index).
 *
 * A sample taken at `at` holds
 * - levels: scheduled, ready, claimed and the oldest ready job's age, as the stats duty counted them
 *   at `at` (its live_refreshed_at);
 * - flows over (since, at], where `since` is the previous sample's `at`: completed, dead and
 *   cancelled (finished_at in the window), attempts_failed (the error entries of the window that
 *   failed attempts wrote, on the jobs whose last attempt failed and those that finished since), and
 *   enqueued, which is derived rather than counted: every
 *   job that arrived is either still live or finished, so arrivals = live now − live at `since` +
 *   finished in between. Redriven jobs count as arrivals; a job that finishes in the instant of a
 *   sample can move one arrival to the next window (the sum stays right), so a window never goes
 *   below zero. `enqueued` is null when there is no earlier sample to subtract (the first sample of
 *   a queue that existed before history did).
 *
 * Idle minutes write nothing: a queue with no live jobs and nothing finished since a sample that
 * was idle too is skipped. So a minute without a row was idle (or the service had no leader; the
 * next row's `since` then shows how long its window is). A queue's latest row is kept whatever its
 * age (it is the base of the next window); older rows are pruned after HISTORY_RETENTION_MS, and a
 * removed queue's after the same time.
 */

export const HISTORY_RETENTION_MS = HISTORY_MINUTES_MAX * 60_000;
const PRUNE_BATCH = 10_000;

/** An error entry written in the sample's window by a failed attempt (see the counted CTE). */
const inWindow = (entry: ReturnType<typeof sql>) => sql`
  (${entry}->>'at')::timestamptz > sample.since AND (${entry}->>'at')::timestamptz <= sample.at
  AND coalesce(${entry}->>'reason', '') IN ('', 'lease_expired', 'deadline_exceeded')`;

/** Sample the given queues (those whose counts are newer than their last sample); answers rows written. */
async function sampleQueues(db: Db, queues: string[]): Promise<number> {
  const result = await sql`
    WITH sample AS (
      SELECT s.queue, s.scheduled, s.ready, s.claimed, s.oldest_ready_at, s.live_refreshed_at AS at,
             s.scheduled + s.ready + s.claimed AS live, q.created_at,
             prev.at AS prev_at, prev.live AS prev_live, prev.idle AS prev_idle,
             coalesce(prev.at, greatest(s.live_refreshed_at - interval '1 minute', q.created_at)) AS since
      FROM baton.queue_stats s
      JOIN baton.queues q ON q.name = s.queue
      LEFT JOIN LATERAL (
        SELECT p.at, p.scheduled + p.ready + p.claimed AS live,
               p.scheduled + p.ready + p.claimed + p.completed + p.dead + p.cancelled + coalesce(p.enqueued, 0)
                 + coalesce(p.attempts_failed, 0) = 0
                 AS idle
        FROM baton.queue_history p WHERE p.queue = s.queue ORDER BY p.minute DESC LIMIT 1
      ) prev ON true
      WHERE s.queue = ANY(${queues}::text[]) AND s.live_refreshed_at IS NOT NULL
        AND (prev.at IS NULL OR s.live_refreshed_at > prev.at)
    ), live_failures AS (
      -- The failed attempts of live jobs, read from their error entries; found through the partial
      -- indexes of the jobs whose last attempt failed (migration 0018), not through every live job.
      SELECT j.queue, e.entry FROM baton.jobs j CROSS JOIN LATERAL jsonb_array_elements(j.errors) e(entry)
      WHERE j.last_error IS NOT NULL AND j.queue = ANY(${queues}::text[])
      UNION ALL
      SELECT sj.queue, e.entry FROM baton.scheduled_jobs sj CROSS JOIN LATERAL jsonb_array_elements(sj.errors) e(entry)
      WHERE sj.last_error IS NOT NULL AND sj.queue = ANY(${queues}::text[])
    ), counted AS (
      SELECT sample.*, f.completed, f.dead, f.cancelled, f.completed + f.dead + f.cancelled AS finished,
             a.live_failed + a.finished_failed AS attempts_failed
      FROM sample CROSS JOIN LATERAL (
        SELECT
          (SELECT count(*) FROM baton.job_history h WHERE h.queue = sample.queue AND h.state = 'completed'
             AND h.finished_at > sample.since AND h.finished_at <= sample.at) AS completed,
          (SELECT count(*) FROM baton.job_history h WHERE h.queue = sample.queue AND h.state = 'dead'
             AND h.finished_at > sample.since AND h.finished_at <= sample.at) AS dead,
          (SELECT count(*) FROM baton.job_history h WHERE h.queue = sample.queue AND h.state = 'cancelled'
             AND h.finished_at > sample.since AND h.finished_at <= sample.at) AS cancelled
      ) f
      CROSS JOIN LATERAL (
        -- An attempt failed in the window: an entry of the window that a failure wrote (a nack has no
        -- reason; a re-arm says lease_expired or deadline_exceeded). Expiry, a superseded unique job
        -- and a failed parent write entries too, but no attempt of the job failed.
        SELECT
          (SELECT count(*) FROM live_failures lf
           WHERE lf.queue = sample.queue AND ${inWindow(sql`lf.entry`)}) AS live_failed,
          -- Jobs that finished since the window began (after it too: a job that failed in the window
          -- and finished a moment later is in history now, no longer live).
          (SELECT count(*) FROM baton.job_history h CROSS JOIN LATERAL jsonb_array_elements(h.errors) e(entry)
           WHERE h.queue = sample.queue AND h.state IN ('completed', 'dead', 'cancelled')
             AND h.finished_at > sample.since AND h.last_error IS NOT NULL
             AND ${inWindow(sql`e.entry`)}) AS finished_failed
      ) a
    )
    INSERT INTO baton.queue_history (queue, minute, at, since, scheduled, ready, claimed, oldest_ready_age_ms,
                                     enqueued, completed, dead, cancelled, attempts_failed)
    SELECT queue, date_trunc('minute', now()), at, since, scheduled, ready, claimed,
           greatest(0, floor(extract(epoch FROM at - oldest_ready_at) * 1000))::bigint,
           CASE WHEN prev_at IS NOT NULL THEN greatest(0, live - prev_live + finished)
                -- A queue created within the window had no jobs before it.
                WHEN created_at >= since THEN live + finished
           END,
           completed, dead, cancelled, attempts_failed
    FROM counted
    WHERE NOT (live = 0 AND finished = 0 AND attempts_failed = 0 AND coalesce(prev_idle, false))
    ON CONFLICT (queue, minute) DO NOTHING`.execute(db);
  return Number(result.numAffectedRows ?? 0);
}

/** One sample of every queue the stats duty has counted, in batches by name. Answers rows written. */
export async function recordQueueHistory(db: Db, batchSize = STATS_BATCH): Promise<number> {
  let written = 0;
  let after = '';
  for (;;) {
    const { rows } = await sql<{ queue: string }>`
      SELECT queue FROM baton.queue_stats WHERE queue > ${after}
      ORDER BY queue LIMIT ${batchSize}`.execute(db);
    if (rows.length === 0) break;
    written += await sampleQueues(
      db,
      rows.map((r) => r.queue),
    );
    if (rows.length < batchSize) break;
    after = rows.at(-1)!.queue;
  }
  return written;
}

/** Delete rows past retention, except each existing queue's latest. Bounded; answers rows deleted. */
export async function pruneQueueHistory(db: Db, retentionMs = HISTORY_RETENTION_MS): Promise<number> {
  const result = await sql`
    DELETE FROM baton.queue_history WHERE ctid IN (
      SELECT o.ctid FROM baton.queue_history o
      WHERE o.minute < now() - ${retentionMs}::bigint * interval '1 millisecond'
        AND (EXISTS (SELECT 1 FROM baton.queue_history n WHERE n.queue = o.queue AND n.minute > o.minute)
             OR NOT EXISTS (SELECT 1 FROM baton.queues q WHERE q.name = o.queue))
      LIMIT ${PRUNE_BATCH})`.execute(db);
  return Number(result.numAffectedRows ?? 0);
}

export class QueueHistoryDuty implements Duty<{ written: number; pruned: number }> {
  readonly name = 'queue_history';

  constructor(private readonly db: Db) {}

  async runOnce(): Promise<{ written: number; pruned: number }> {
    const written = await recordQueueHistory(this.db);
    const pruned = await pruneQueueHistory(this.db);
    return { written, pruned };
  }

  /**
   * Early in the next minute, after the stats duty's first tick of it. Two leaders, or two runs in
   * one minute, are harmless: a queue has one row per minute (ON CONFLICT DO NOTHING).
   */
  nextRunInMs(): number {
    return 60_000 - (Date.now() % 60_000) + 1_000;
  }
}
