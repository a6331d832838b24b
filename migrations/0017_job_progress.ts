import { type Kysely, sql } from 'kysely';

/**
 * A job's progress: what its worker last reported with a renewal (POST /v1/jobs/{id}/renew with
 * `progress`), latest wins. A nullable jsonb without a default on every table a job lives in (the
 * ring, the scheduled and the waiting jobs, history), so adding it rewrites nothing and a job that
 * never reports carries a NULL that costs nothing. It is in no index: a renewal that sets it can
 * still be HOT when the page has room. Every move carries it (job-row.ts: carriedColumns,
 * finishedRow()), so a finished job keeps its last report.
 */
export async function up(db: Kysely<any>): Promise<void> {
  for (const table of ['jobs', 'scheduled_jobs', 'waiting_jobs', 'job_history']) {
    await sql`ALTER TABLE ${sql.table(`baton.${table}`)} ADD COLUMN progress jsonb`.execute(db);
  }
}

export async function down(db: Kysely<any>): Promise<void> {
  for (const table of ['job_history', 'waiting_jobs', 'scheduled_jobs', 'jobs']) {
    await sql`ALTER TABLE ${sql.table(`baton.${table}`)} DROP COLUMN IF EXISTS progress`.execute(db);
  }
}
