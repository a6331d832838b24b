import { sql } from 'kysely';
import type { Db } from './database.js';
import { pendingMigrations } from './migrate.js';

/**
 * The readiness probe's question: does the database answer, and is its schema the one this build
 * expects? Answers the migrations not yet applied (none when ready); throws when the database
 * does not answer.
 */
export async function unappliedMigrations(db: Db): Promise<string[]> {
  await sql`SELECT 1`.execute(db);
  return pendingMigrations(db);
}
