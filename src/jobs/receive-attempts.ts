import { sql } from 'kysely';
import type { Db } from '../db/database.js';
import type { ClaimedRow } from './claim/types.js';

/**
 * A receive that may be sent again: what an SQS FIFO ReceiveMessage with a ReceiveRequestAttemptId
 * handed out, kept in baton.receive_attempts (migration 0015) so that the same receive sent again
 * within RECEIVE_ATTEMPT_WINDOW_MS, on any replica, answers the same jobs under the same lease tokens
 * (so the same receipt handles), as SQS does for a receive whose answer was lost.
 *
 * Every statement names the queue and the caller (the API key the request was made with): an attempt
 * id is looked up only among the caller's own receives of that queue, and a job is answered only while
 * it is still in that queue, claimed under the token it was handed out with, its lease as handed out
 * (not changed by a ChangeMessageVisibility) and not run out. Otherwise the attempt is `stale`: some of
 * its jobs were deleted, made visible again, had their visibility changed or timed out, and it cannot be
 * replayed. Receives without an attempt id never touch the table.
 */

/** How long a receive can be sent again with its attempt id (SQS: five minutes). */
export const RECEIVE_ATTEMPT_WINDOW_MS = 5 * 60_000;

/** Whose receive of which queue under which attempt id (the table's key). */
export interface ReceiveAttempt {
  queue: string;
  caller: string;
  attemptId: string;
}

/**
 * The attempt's jobs again, their leases renewed by leaseMs (else each job's own lease length), as
 * SQS resets the visibility timeout of a receive sent again; `stale` when it cannot be replayed;
 * undefined when there is no such attempt within the window (a receive as any other).
 */
export async function replayReceive(
  db: Db,
  attempt: ReceiveAttempt,
  leaseMs: number | undefined,
): Promise<ClaimedRow[] | 'stale' | undefined> {
  return db
    .transaction()
    .execute(async (trx) => {
      // Held until the end: the same attempt sent twice at once is answered one after the other.
      const found = await sql<{ n: number }>`
      SELECT cardinality(job_ids) AS n FROM baton.receive_attempts
      WHERE queue = ${attempt.queue} AND caller = ${attempt.caller} AND attempt_id = ${attempt.attemptId}
        AND created_at > now() - ${RECEIVE_ATTEMPT_WINDOW_MS} * interval '1 millisecond'
      FOR UPDATE`.execute(trx);
      if (found.rows.length === 0) return undefined;
      const key = (alias: string) => {
        const t = sql.ref(alias);
        return sql`${t}.queue = ${attempt.queue} AND ${t}.caller = ${attempt.caller} AND ${t}.attempt_id = ${attempt.attemptId}`;
      };
      const { rows } = await sql<ClaimedRow>`
      WITH handed AS (
        SELECT x.id, x.token, x.until
        FROM baton.receive_attempts a
        CROSS JOIN LATERAL unnest(a.job_ids, a.lease_tokens, a.leases_until) AS x(id, token, until)
        WHERE ${key('a')}
      ), held AS (
        SELECT j.id, j.slot FROM baton.jobs j JOIN handed h ON j.id = h.id
        WHERE j.queue = ${attempt.queue} AND j.state = 'claimed' AND j.lease_token = h.token
          AND j.lease_expires_at = h.until AND j.lease_expires_at > clock_timestamp()
        ORDER BY j.id
        FOR UPDATE OF j
      ), renewed AS (
        UPDATE baton.jobs j SET
          lease_expires_at = least(
            clock_timestamp() + coalesce(${leaseMs ?? null}::integer, j.lease_ms) * interval '1 millisecond',
            j.deadline_at),
          lease_ms = coalesce(${leaseMs ?? null}::integer, j.lease_ms)
        FROM held
        WHERE j.id = held.id AND j.slot = held.slot AND j.queue = ${attempt.queue} AND j.state = 'claimed'
        RETURNING j.id, j.queue, j.group_key, j.payload::text AS payload_json, j.priority, j.attempts,
                  j.max_attempts, j.lease_token, j.lease_expires_at, j.deadline_at, j.claimed_at, j.run_at,
                  j.created_at, j.meta
      ), noted AS (
        -- The leases as now handed out: a third sending of the receive is matched against these.
        UPDATE baton.receive_attempts t
        SET leases_until = (SELECT array_agg(r.lease_expires_at ORDER BY array_position(t.job_ids, r.id))
                            FROM renewed r)
        WHERE ${key('t')} AND (SELECT count(*) FROM renewed) = cardinality(t.job_ids)
      )
      SELECT * FROM renewed`.execute(trx);
      // Some job is not as it was handed out: roll back (the leases renewed above stay as they were).
      if (rows.length !== found.rows[0]!.n) throw new StaleAttempt();
      return rows;
    })
    .catch((err) => {
      if (err instanceof StaleAttempt) return 'stale' as const;
      throw err;
    });
}

class StaleAttempt extends Error {}

/**
 * Keep what a receive with an attempt id handed out (nothing, when it handed out nothing: sent again,
 * it is a new receive). A new receive under an attempt id whose row is past the window, or stale,
 * replaces it.
 */
export async function recordReceive(db: Db, attempt: ReceiveAttempt, rows: ClaimedRow[]): Promise<void> {
  if (rows.length === 0) return;
  // The leases' ends as the database holds them (a Date keeps milliseconds only): read from the rows.
  await sql`
    INSERT INTO baton.receive_attempts (queue, caller, attempt_id, job_ids, lease_tokens, leases_until)
    SELECT ${attempt.queue}, ${attempt.caller}, ${attempt.attemptId}, array_agg(x.id ORDER BY x.ord),
           array_agg(x.token ORDER BY x.ord), array_agg(j.lease_expires_at ORDER BY x.ord)
    FROM unnest(${rows.map((r) => r.id)}::bigint[], ${rows.map((r) => r.lease_token)}::uuid[])
      WITH ORDINALITY AS x(id, token, ord)
    JOIN baton.jobs j ON j.id = x.id AND j.queue = ${attempt.queue} AND j.lease_token = x.token
    HAVING count(*) > 0
    ON CONFLICT (queue, caller, attempt_id) DO UPDATE SET
      job_ids = excluded.job_ids, lease_tokens = excluded.lease_tokens, leases_until = excluded.leases_until,
      created_at = now()`.execute(db);
}

/** Delete attempts past the window, oldest first, at most `batchSize` (the leader's duty). */
export async function pruneReceiveAttempts(db: Db, batchSize: number): Promise<number> {
  const result = await sql`
    DELETE FROM baton.receive_attempts a
    USING (
      SELECT queue, caller, attempt_id FROM baton.receive_attempts
      WHERE created_at <= now() - ${RECEIVE_ATTEMPT_WINDOW_MS} * interval '1 millisecond'
      ORDER BY created_at
      LIMIT ${batchSize}
      FOR UPDATE SKIP LOCKED
    ) old
    WHERE a.queue = old.queue AND a.caller = old.caller AND a.attempt_id = old.attempt_id
      AND a.created_at <= now() - ${RECEIVE_ATTEMPT_WINDOW_MS} * interval '1 millisecond'`.execute(db);
  return Number(result.numAffectedRows ?? 0);
}
