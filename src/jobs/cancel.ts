import { sql } from 'kysely';
import type { Db } from '../db/database.js';
import { finishedJobColumns, finishedRow, type JobRow } from './job-row.js';

const cancelled = finishedRow('cancelled');

/**
 * Cancel: a scheduled, ready or claimed job moves to job_history as `cancelled`. A claimed job's
 * worker finds out on its next renew, ack or nack (409 lease_lost), because its row is gone.
 *
 * If an ack holds the row at this moment, the DELETE waits for it and then finds nothing; the caller
 * then reads the job from history and answers 409 (it completed first).
 */
export async function cancelJob(db: Db, id: string): Promise<JobRow | undefined> {
  const { rows } = await sql<JobRow>`
    WITH gone AS (DELETE FROM baton.jobs WHERE id = ${id} RETURNING *)
    INSERT INTO baton.job_history AS h (${cancelled.columns})
    SELECT ${cancelled.values} FROM gone
    RETURNING ${finishedJobColumns}`.execute(db);
  return rows[0];
}
