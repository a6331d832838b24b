import type { DbPooler } from '../config/settings.js';
import type { Config } from '../config.js';

/**
 * What goes where when DATABASE_URL leads to a connection pooler (BATON_DB_POOLER). Requests, the
 * leader's duties and its election go through the pooler: each is a statement or a transaction, and
 * the election is a lease row, not a session lock (maintenance/leadership.ts). Two things need a
 * session of their own, which a transaction pooler cannot keep for a client:
 * - migrations, which hold a session advisory lock across many transactions (db/migrate.ts): through
 *   a transaction pooler the lock would be taken on one server connection and its unlock sent on
 *   another, leaving it held;
 * - LISTEN, whose notifications reach the server connection that ran it, whichever client has it.
 * Both go to BATON_DIRECT_DATABASE_URL. Without one, migrations are refused and replicas find each
 * other's jobs by polling (BATON_POLL_INTERVAL_MS), as they do whenever a notification is missed.
 */

type PoolerSettings = Pick<Config, 'dbPooler' | 'directDatabaseUrl' | 'listenDatabaseUrl'>;

/** A URL and what it leads to. */
export interface Target {
  url: string;
  pooler: DbPooler;
}

/** Where migrations run, or undefined when only a transaction pooler is known. */
export function migrationTarget(config: PoolerSettings, databaseUrl: string): Target | undefined {
  if (config.directDatabaseUrl) return { url: config.directDatabaseUrl, pooler: 'none' };
  if (config.dbPooler === 'transaction') return undefined;
  return { url: databaseUrl, pooler: config.dbPooler };
}

/** Why start-up (or `npm run migrate`) will not migrate through a transaction pooler. */
export const MIGRATION_NEEDS_DIRECT_URL =
  'migrations need a connection to PostgreSQL itself, not a transaction pooler (they hold a session ' +
  'lock): set BATON_DIRECT_DATABASE_URL, or run `npm run migrate` with DATABASE_URL naming the ' +
  'database directly and BATON_DB_POOLER unset';

/** Where the LISTEN connection goes, or undefined when only a transaction pooler is known. */
export function listenTarget(config: PoolerSettings, databaseUrl: string): Target | undefined {
  if (config.listenDatabaseUrl) return { url: config.listenDatabaseUrl, pooler: 'none' };
  return migrationTarget(config, databaseUrl);
}
