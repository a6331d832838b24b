import { sql } from 'kysely';
import type { Db } from '../db/database.js';
import { queueVisible } from '../db/queue-patterns.js';

/**
 * Delete finished jobs (completed, dead or cancelled) by id: an operator clearing dead jobs it has
 * looked at, before their retention would. A live job is never deleted here (cancel it first), so
 * nothing a worker holds or a claim could hand out disappears under it.
 *
 * The idempotency key that named a deleted job goes with it, in the same statement: the history
 * partitions are emptied only when no job of theirs holds a live key (docs/adr/0001), a promise
 * that a key answering a job nobody can read would break; a producer's retry with that key now
 * creates a new job. Its dependency edges go with the edge duty (maintenance/job-edges.ts), as
 * those of a job pruned by retention do; a child's own record of the parent's outcome stays.
 *
 * With `patterns` (a queue-limited key), only jobs of queues they match: in the statement, so a job
 * of another tenant is never touched. Answers the jobs deleted.
 */
export async function deleteFinishedJobs(
  db: Db,
  ids: string[],
  patterns?: string[],
): Promise<{ id: string; queue: string }[]> {
  if (ids.length === 0) return [];
  const { rows } = await sql<{ id: string; queue: string }>`
    WITH gone AS (
      DELETE FROM baton.job_history h WHERE h.id = ANY(${ids}::bigint[]) AND ${queueVisible('h.queue', patterns)}
      RETURNING h.id, h.queue, h.idempotency_key
    ), keys AS (
      DELETE FROM baton.idempotency_keys k USING gone g
      WHERE k.queue = g.queue AND k.key = g.idempotency_key AND k.job_id = g.id
    )
    SELECT id::text, queue FROM gone`.execute(db);
  return rows;
}
