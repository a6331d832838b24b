import { type Kysely, sql } from 'kysely';

/**
 * Failed attempts as figures of their own, beside dead jobs: a retry storm shows before anything
 * dies (maintenance/queue-stats.ts, maintenance/queue-history.ts).
 * - queue_stats.failing: live jobs whose last attempt failed (waiting for a retry, or ready or
 *   running again), counted every tick with the live counts;
 * - queue_history.attempts_failed: attempts that failed in a sample's window (a nack, a lease that
 *   ran out, a deadline), whether the job then retried or died; NULL in samples taken before.
 * Both are read from the error entries jobs already carry: nothing on the hot path writes more.
 * Adding a column with a constant default or none rewrites neither table.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`ALTER TABLE baton.queue_stats ADD COLUMN failing bigint NOT NULL DEFAULT 0`.execute(db);
  await sql`ALTER TABLE baton.queue_history ADD COLUMN attempts_failed bigint`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`ALTER TABLE baton.queue_history DROP COLUMN IF EXISTS attempts_failed`.execute(db);
  await sql`ALTER TABLE baton.queue_stats DROP COLUMN IF EXISTS failing`.execute(db);
}
