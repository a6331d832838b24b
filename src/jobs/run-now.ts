import { sql } from 'kysely';
import type { Db } from '../db/database.js';
import { queueVisible } from '../db/queue-patterns.js';
import { carriedColumns, carriedValues } from './job-row.js';

/**
 * Scheduled jobs picked by id become ready now: a retry's backoff or a delay cut short by an operator
 * ("run now"). The same move as the promoter's (maintenance/promote.ts: DELETE from
 * baton.scheduled_jobs → INSERT into the ring in the job's slot, in one statement), by id instead of
 * by run_at, with run_at set to now, so the job takes its place in the claim order as a job enqueued
 * now would. Rows another promoter or a cancel holds are skipped (SKIP LOCKED): they are moving
 * already. Its unique key and attempts go with it. With `patterns` (a queue-limited key), only jobs
 * of queues they match. Answers the jobs moved.
 */
export async function runScheduledNow(
  db: Db,
  ids: string[],
  patterns?: string[],
): Promise<{ id: string; queue: string }[]> {
  if (ids.length === 0) return [];
  const { rows } = await sql<{ id: string; queue: string }>`
    WITH picked AS (
      SELECT s.id FROM baton.scheduled_jobs s WHERE s.id = ANY(${ids}::bigint[]) AND ${queueVisible('s.queue', patterns)}
      FOR UPDATE SKIP LOCKED
    ), moved AS (
      DELETE FROM baton.scheduled_jobs s USING picked WHERE s.id = picked.id RETURNING s.*
    )
    INSERT INTO baton.jobs (slot, ${carriedColumns}, state, run_at, attempts, claimed_at, worker_id, last_error,
                            errors)
    SELECT baton.job_slot(id), ${carriedValues()}, 'ready', now(), attempts, claimed_at, worker_id, last_error,
           errors
    FROM moved
    RETURNING id::text, queue`.execute(db);
  return rows;
}
