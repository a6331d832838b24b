import { sql } from 'kysely';
import type { Db } from './database.js';
import { databaseSchema, pendingMigrations } from './migrate.js';

export { BUILD_SCHEMA } from './migrate.js';

/**
 * The readiness probe's question: does the database answer, and is its schema the one this build
 * expects? Answers the migrations not yet applied (none when ready); throws when the database
 * does not answer.
 */
async function unappliedMigrations(db: Db): Promise<string[]> {
  await sql`SELECT 1`.execute(db);
  return pendingMigrations(db);
}

/**
 * The readiness probe's answer: the migrations this build expects and the database has not applied
 * (none when ready), and the newest migration the database has (during a rolling upgrade, possibly
 * one this build does not know). Throws when the database does not answer.
 */
export async function schemaReadiness(db: Db): Promise<{ pending: string[]; database: string | null }> {
  const pending = await unappliedMigrations(db);
  return { pending, database: await databaseSchema(db) };
}
