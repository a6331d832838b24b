import { sql } from 'kysely';
import type { Db } from '../db/database.js';
import { isoMillis } from '../db/sql-time.js';
import { appendError, finishedRow, liveCommonColumns, notExpired } from './job-row.js';

/**
 * A job that comes back to waiting without an enqueue (a retry after a nack, a re-arm of an expired
 * lease, a claim handed back, a redrive) takes its unique key back, so that at most one job per
 * queue and key waits, always (unique.ts: the key is free from the moment its job is claimed, and
 * a newer enqueue may have taken it meanwhile).
 *
 * For each key, the job that stands is the key's holder if that is another job and it still waits
 * (the newer enqueue: its producer holds its id, and for `replace` its data is the newer); otherwise
 * the returning job (the oldest, if several of one key return at once). A returning job that does
 * not stand gives way: it is cancelled, its last error saying `reason: superseded` and naming the
 * job that stands (`superseded_by`), which does the work for both. Nothing is lost: the standing job
 * carries the key's newest data.
 *
 * Must run in the transaction that returned the jobs, right after the statement that did, so no
 * other transaction ever sees two jobs of one key waiting. Two statements:
 * 1. lock the keys' rows (insert the rows missing, sorted, so returners and enqueues of shared keys
 *    cannot deadlock on them) and bump each row's `generation`: an enqueue whose snapshot is older
 *    than this return sees the bump and does not take the key over on what its snapshot says
 *    (enqueue.ts, insertJobsGated), nor does the expiry sweep remove the row (unique.ts);
 * 2. with the rows locked, in a fresh snapshot: every change of a key's holder waits for this
 *    transaction, so the holder read here is the holder.
 * Lock order is job row, then key row, here; an enqueue holds a key row and waits on a job row only
 * for a job that its snapshot shows waiting, which a returning job (claimed or dead until this
 * transaction commits) never is; so the two never wait on each other.
 */

export interface ReturnedJob {
  id: string;
  queue: string;
  unique_key: string | null;
}

export interface GaveWay {
  id: string;
  queue: string;
  superseded_by: string;
}

/** The returning jobs that gave way (cancelled), each with the job that stands for it. */
export async function settleReturnedKeys(trx: Db, returned: readonly ReturnedJob[]): Promise<GaveWay[]> {
  const keyed = returned.filter((j): j is ReturnedJob & { unique_key: string } => j.unique_key !== null);
  if (keyed.length === 0) return [];
  const ids = keyed.map((j) => j.id);
  const queues = keyed.map((j) => j.queue);
  const keys = keyed.map((j) => j.unique_key);

  // One row per key (a key named twice in one INSERT ... ON CONFLICT is an error); the oldest job
  // of the key is named if the row is new.
  await sql`
    INSERT INTO baton.unique_keys AS k (queue, key, job_id)
    SELECT DISTINCT ON (r.queue, r.key) r.queue, r.key, r.id
    FROM unnest(${queues}::text[], ${keys}::text[], ${ids}::bigint[]) AS r(queue, key, id)
    ORDER BY r.queue, r.key, r.id
    ON CONFLICT (queue, key) DO UPDATE SET generation = k.generation + 1`.execute(trx);

  const cancelled = finishedRow('cancelled', {
    lastError: sql`entry`,
    errors: appendError(sql`errors`, sql`entry`),
  });
  const { rows } = await sql<GaveWay>`
    WITH r AS (
      SELECT * FROM unnest(${queues}::text[], ${keys}::text[], ${ids}::bigint[]) AS r(queue, key, id)
    ), standing AS (
      -- The holder if it is not returning and still waits (the ring, or the scheduled jobs); else
      -- the oldest returning job of the key.
      SELECT k.queue, k.key,
             CASE WHEN k.job_id NOT IN (SELECT id FROM r)
                   AND (EXISTS (SELECT 1 FROM baton.jobs j WHERE j.id = k.job_id AND j.state = 'ready'
                                  AND ${notExpired('j')})
                        OR EXISTS (SELECT 1 FROM baton.scheduled_jobs s WHERE s.id = k.job_id
                                     AND ${notExpired('s')})
                        OR EXISTS (SELECT 1 FROM baton.waiting_jobs w WHERE w.id = k.job_id
                                     AND ${notExpired('w')}))
                  THEN k.job_id
                  ELSE (SELECT min(r2.id) FROM r r2 WHERE r2.queue = k.queue AND r2.key = k.key)
             END AS job_id
      FROM baton.unique_keys k
      WHERE (k.queue, k.key) IN (SELECT queue, key FROM r)
    ), taken AS (
      UPDATE baton.unique_keys k SET job_id = s.job_id
      FROM standing s WHERE k.queue = s.queue AND k.key = s.key AND k.job_id <> s.job_id
    ), yielding AS (
      SELECT r.id, s.job_id AS superseded_by, s.key
      FROM r JOIN standing s ON s.queue = r.queue AND s.key = r.key
      WHERE r.id <> s.job_id
    ), ring AS (
      DELETE FROM baton.jobs j USING yielding y WHERE j.id = y.id AND j.state = 'ready'
      RETURNING ${liveCommonColumns('j')}, y.superseded_by, y.key
    ), later AS (
      DELETE FROM baton.scheduled_jobs s USING yielding y WHERE s.id = y.id
      RETURNING ${liveCommonColumns('s')}, y.superseded_by, y.key
    ), gone AS (
      SELECT g.*, jsonb_build_object(
               'attempt', g.attempts, 'at', ${isoMillis(sql`now()`)},
               'message', format('superseded by job %s, which holds unique key %s', g.superseded_by, g.key),
               'reason', 'superseded', 'superseded_by', g.superseded_by::text) AS entry
      FROM (SELECT * FROM ring UNION ALL SELECT * FROM later) g
    )
    INSERT INTO baton.job_history AS h (${cancelled.columns})
    SELECT ${cancelled.values} FROM gone
    RETURNING h.id, h.queue, (h.last_error->>'superseded_by') AS superseded_by`.execute(trx);
  return rows;
}
