import { type Kysely, sql } from 'kysely';

/**
 * The lease token that completed a job, so that a repeated ack of the same lease (a client
 * retrying after a lost answer) is answered 200 with the completed job rather than 409. It is
 * never shown in any answer.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`ALTER TABLE baton.job_history ADD COLUMN ack_token uuid`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`ALTER TABLE baton.job_history DROP COLUMN IF EXISTS ack_token`.execute(db);
}
