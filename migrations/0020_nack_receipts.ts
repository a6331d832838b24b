import { type Kysely, sql } from 'kysely';

/**
 * The lease token of the nack that last moved a job (jobs/nack.ts): its receipt. A nack whose
 * connection was lost before its answer may or may not have committed, and running it again could
 * not tell: the first run cleared the lease, so the second would answer lease_lost for a nack that
 * happened. The token left on the job says it did (service/leases.ts reads it back before running a
 * nack again). A nullable uuid without a default on every table a job lives in, so adding it rewrites
 * nothing and a job never nacked carries a NULL; in no index (the read-back finds the job by id).
 * Every move carries it (job-row.ts: carriedColumns, finishedRow()).
 */
export async function up(db: Kysely<any>): Promise<void> {
  for (const table of ['jobs', 'scheduled_jobs', 'waiting_jobs', 'job_history']) {
    await sql`ALTER TABLE ${sql.table(`baton.${table}`)} ADD COLUMN nacked_token uuid`.execute(db);
  }
}

export async function down(db: Kysely<any>): Promise<void> {
  for (const table of ['job_history', 'waiting_jobs', 'scheduled_jobs', 'jobs']) {
    await sql`ALTER TABLE ${sql.table(`baton.${table}`)} DROP COLUMN IF EXISTS nacked_token`.execute(db);
  }
}
