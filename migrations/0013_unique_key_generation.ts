import { type Kysely, sql } from 'kysely';

/**
 * A unique key's row gets a generation, bumped each time a job coming back to waiting takes the
 * row's lock (src/jobs/unique-return.ts). The statements that act on a key without its lock, on
 * what their snapshot says of its job (the enqueue that takes a key over, the sweep that removes a
 * stale row), compare the generation their snapshot read with the row's newest: a return committed
 * after their snapshot began changes it, and they leave the key alone.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`ALTER TABLE baton.unique_keys ADD COLUMN generation bigint NOT NULL DEFAULT 0`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`ALTER TABLE baton.unique_keys DROP COLUMN IF EXISTS generation`.execute(db);
}
