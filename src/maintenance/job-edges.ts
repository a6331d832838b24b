import { sql } from 'kysely';
import type { Db } from '../db/database.js';
import { type Duty, MAINTENANCE_BATCH } from './duty.js';

/**
 * Forget dependencies (baton.job_edges, migration 0016) whose child is gone: pruned from history past
 * its retention (or never written, a request rolled back). An edge lives as long as its child: it is
 * what the child's page and `GET /v1/jobs/{id}/parents` read. History goes by TRUNCATE, which no row
 * trigger sees, so this duty walks the edges a slice of children at a time, by child id from where
 * the last run stopped (wrapping round), and deletes the edges of children found in no job table.
 * Two leaders at once are harmless: a child found nowhere never comes back (ids are not reused).
 */
export async function forgetEdgesOfGoneJobs(
  db: Db,
  after: string,
  batchSize: number,
): Promise<{ deleted: number; last: string | undefined }> {
  const { rows } = await sql<{ child: string; gone: boolean }>`
    SELECT c.child::text,
           NOT (EXISTS (SELECT 1 FROM baton.job_history h WHERE h.id = c.child)
                OR EXISTS (SELECT 1 FROM baton.jobs j WHERE j.id = c.child)
                OR EXISTS (SELECT 1 FROM baton.scheduled_jobs s WHERE s.id = c.child)
                OR EXISTS (SELECT 1 FROM baton.waiting_jobs w WHERE w.id = c.child)) AS gone
    FROM (SELECT DISTINCT child FROM (
            SELECT child FROM baton.job_edges WHERE child > ${after}::bigint ORDER BY child LIMIT ${batchSize}
          ) e) c
    ORDER BY c.child`.execute(db);
  const gone = rows.filter((r) => r.gone).map((r) => r.child);
  let deleted = 0;
  if (gone.length > 0) {
    const result = await sql`DELETE FROM baton.job_edges WHERE child = ANY(${gone}::bigint[])`.execute(db);
    deleted = Number(result.numAffectedRows ?? 0);
  }
  return { deleted, last: rows.at(-1)?.child };
}

export class JobEdgesDuty implements Duty<number> {
  readonly name = 'job_edges';
  /** Where the walk goes on from: the last child looked at ('0' to start again). */
  private after = '0';

  constructor(
    private readonly db: Db,
    private readonly tickMs: number,
    private readonly batchSize = MAINTENANCE_BATCH,
  ) {}

  async runOnce(): Promise<number> {
    const { deleted, last } = await forgetEdgesOfGoneJobs(this.db, this.after, this.batchSize);
    this.after = last ?? '0';
    return deleted;
  }

  nextRunInMs(): number {
    return this.tickMs;
  }
}
