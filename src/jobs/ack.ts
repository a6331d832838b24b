import { type RawBuilder, sql } from 'kysely';
import type { Db } from '../db/database.js';
import { finishedJobColumns, historyInsertColumns, type JobRow } from './job-row.js';

/**
 * Ack: the worker holding the current lease says the job is done. The job leaves the live table and
 * lands in job_history as `completed`, with the worker's result, in one statement.
 *
 * Every ack names the job and its lease token; the DELETE matches only a row still `claimed` under
 * that token. A stale worker (its lease expired and the job went to someone else) matches nothing.
 * If the leader is re-arming the row at this very moment, the DELETE waits for that to commit,
 * re-checks the row, and matches nothing either. A batch of acks is the same statement over many
 * rows; each item's outcome is reported separately.
 */

export interface AckItem {
  id: string;
  leaseToken: string;
  /** The result as JSON text, or undefined for none. */
  resultJson?: string;
}

export async function ackJobs(db: Db, acks: AckItem[]): Promise<Map<string, JobRow>> {
  const { rows } = await ackStatement<JobRow>(acks, finishedJobColumns).execute(db);
  return new Map(rows.map((r) => [r.id, r]));
}

/**
 * The same ack, answering only which ids were acked. The batch route needs nothing more, and not
 * reading back every finished row (payload, result, errors, four timestamps) saves PostgreSQL the
 * output conversion and the server the parsing of rows it would throw away.
 */
export async function ackJobIds(db: Db, acks: AckItem[]): Promise<Set<string>> {
  const { rows } = await ackStatement<{ id: string }>(acks, sql`h.id`).execute(db);
  return new Set(rows.map((r) => r.id));
}

function ackStatement<R>(acks: AckItem[], returning: RawBuilder<unknown>) {
  const input = JSON.stringify(acks.map((a) => ({ id: a.id, token: a.leaseToken })));
  const results = `[${acks.map((a) => a.resultJson ?? 'null').join(',')}]`;
  return sql<R>`
    WITH input AS (
      SELECT (a.item->>'id')::bigint AS id, (a.item->>'token')::uuid AS token,
             nullif(r.result::jsonb, 'null'::jsonb) AS result
      FROM json_array_elements(${input}::json) WITH ORDINALITY AS a(item, ord)
      JOIN json_array_elements(${results}::json) WITH ORDINALITY AS r(result, ord) USING (ord)
    ), done AS (
      DELETE FROM baton.jobs j USING input i
      WHERE j.id = i.id AND j.state = 'claimed' AND j.lease_token = i.token
      RETURNING j.*, i.result
    )
    INSERT INTO baton.job_history AS h (${historyInsertColumns})
    SELECT id, queue, 'completed', priority, run_at, attempts, max_attempts, worker_id, idempotency_key,
           NULL, created_at, claimed_at, now(), last_error, errors, result, payload
    FROM done
    RETURNING ${returning}`;
}
