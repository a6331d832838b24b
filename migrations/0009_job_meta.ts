import { type Kysely, sql } from 'kysely';

/**
 * A general metadata slot per job and per queue, written by the layers that need one (the SQS
 * endpoint first: message attributes, system attributes and the sender; trace context later) and
 * never read by the job lifecycle itself. NULL when nothing was set, so existing rows and jobs
 * that carry none cost nothing. A job keeps its metadata when it finishes (job_history.meta).
 *
 * Numbered 0009 so that the storage redesign's migrations can come first; renumber on merge.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`ALTER TABLE baton.jobs ADD COLUMN meta jsonb`.execute(db);
  await sql`ALTER TABLE baton.job_history ADD COLUMN meta jsonb`.execute(db);
  await sql`ALTER TABLE baton.queues ADD COLUMN meta jsonb`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`ALTER TABLE baton.queues DROP COLUMN IF EXISTS meta`.execute(db);
  await sql`ALTER TABLE baton.job_history DROP COLUMN IF EXISTS meta`.execute(db);
  await sql`ALTER TABLE baton.jobs DROP COLUMN IF EXISTS meta`.execute(db);
}
