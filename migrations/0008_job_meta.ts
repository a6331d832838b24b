import { type Kysely, sql } from 'kysely';

/**
 * A general metadata slot per job and per queue, written by the layers that need one (the SQS
 * endpoint first: message attributes, system attributes and the sender; trace context later) and
 * never read by the job lifecycle itself. NULL when nothing was set, so existing rows and jobs
 * that carry none cost nothing. A job keeps its metadata wherever it moves: the ring, the scheduled
 * jobs, history (job-row.ts: carriedColumns and finishedRow()).
 */
export async function up(db: Kysely<any>): Promise<void> {
  for (const table of ['jobs', 'scheduled_jobs', 'job_history', 'queues']) {
    await sql`ALTER TABLE ${sql.table(`baton.${table}`)} ADD COLUMN meta jsonb`.execute(db);
  }
}

export async function down(db: Kysely<any>): Promise<void> {
  for (const table of ['queues', 'job_history', 'scheduled_jobs', 'jobs']) {
    await sql`ALTER TABLE ${sql.table(`baton.${table}`)} DROP COLUMN IF EXISTS meta`.execute(db);
  }
}
