import { type Kysely, sql } from 'kysely';
import { Migrator } from 'kysely/migration';
import { migrations } from '../../migrations/index.js';

const MIGRATION_SCHEMA = 'baton';
/** Key of the session advisory lock that serialises migrators across replicas. */
const MIGRATION_LOCK_KEY = sql`hashtext('baton.migrate')`;

export interface MigrationResult {
  applied: string[];
}

/**
 * Apply every pending migration. Safe when several replicas start at once: the whole run, including
 * the creation of Kysely's bookkeeping tables, happens under a session advisory lock on one
 * connection, so the second replica waits and then finds nothing to do.
 */
// biome-ignore lint/suspicious/noExplicitAny: migrations run against any schema version
export async function migrateToLatest(db: Kysely<any>): Promise<MigrationResult> {
  return db.connection().execute(async (conn) => {
    await sql`SELECT pg_advisory_lock(${MIGRATION_LOCK_KEY})`.execute(conn);
    try {
      const migrator = new Migrator({
        db: conn,
        provider: { getMigrations: async () => migrations },
        migrationTableSchema: MIGRATION_SCHEMA,
      });
      const { error, results = [] } = await migrator.migrateToLatest();
      if (error) throw error;
      return { applied: results.filter((r) => r.status === 'Success').map((r) => r.migrationName) };
    } finally {
      await sql`SELECT pg_advisory_unlock(${MIGRATION_LOCK_KEY})`.execute(conn);
    }
  });
}

/**
 * The schema this build runs: its newest migration. A replica of the release before runs the one
 * before it, and stays ready on a database the newer one has migrated (docs/operating.md, "Upgrading").
 */
export const BUILD_SCHEMA: string = Object.keys(migrations).at(-1)!;

/** Names of the migrations the database has applied, by whichever release (none before any). */
// biome-ignore lint/suspicious/noExplicitAny: see above
async function appliedMigrations(db: Kysely<any>): Promise<string[]> {
  const exists = await sql<{
    t: string | null;
  }>`SELECT to_regclass('baton.kysely_migration')::text AS t`.execute(db);
  if (!exists.rows[0]?.t) return [];
  const applied = await sql<{ name: string }>`SELECT name FROM baton.kysely_migration`.execute(db);
  return applied.rows.map((r) => r.name);
}

/**
 * The database's schema against this build's: the migrations this build knows that the database has
 * not applied (all of them if none), and the newest migration it has (null before any; during a
 * rolling upgrade possibly one this build does not know).
 */
// biome-ignore lint/suspicious/noExplicitAny: see above
export async function schemaState(db: Kysely<any>): Promise<{ pending: string[]; newest: string | null }> {
  const applied = await appliedMigrations(db);
  const done = new Set(applied);
  // Migration names sort in the order they apply (a four-digit number first).
  const newest = applied.length > 0 ? applied.reduce((a, b) => (b > a ? b : a)) : null;
  return { pending: Object.keys(migrations).filter((name) => !done.has(name)), newest };
}

/** Names of migrations this build knows that the database has not applied (all of them if none). */
// biome-ignore lint/suspicious/noExplicitAny: see above
export async function pendingMigrations(db: Kysely<any>): Promise<string[]> {
  return (await schemaState(db)).pending;
}
