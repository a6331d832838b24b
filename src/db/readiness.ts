import type { Db } from './database.js';
import { schemaState } from './migrate.js';

export { BUILD_SCHEMA } from './migrate.js';

/**
 * The readiness probe's question: does the database answer, and is its schema the one this build
 * expects? Answers the migrations this build expects and the database has not applied (none when
 * ready), and the newest migration the database has (during a rolling upgrade, possibly one this
 * build does not know). Throws when the database does not answer.
 */
export async function schemaReadiness(db: Db): Promise<{ pending: string[]; database: string | null }> {
  const { pending, newest } = await schemaState(db);
  return { pending, database: newest };
}
