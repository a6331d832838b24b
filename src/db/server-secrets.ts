import type { Db } from './database.js';

/**
 * A secret every replica shares, made once by migration 0012 from PostgreSQL's strong random source
 * (gen_random_uuid) and read from baton.server_secrets: the SQS receipt handles' MAC key. Kept in the
 * database, not in configuration, so replicas agree on it with nothing to set up or rotate by hand.
 */
export async function serverSecret(db: Db, name: string): Promise<Buffer> {
  const row = await db
    .selectFrom('baton.server_secrets')
    .select('secret')
    .where('name', '=', name)
    .executeTakeFirst();
  if (!row) throw new Error(`baton.server_secrets has no secret named ${name}: run the migrations`);
  return row.secret;
}
