import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import { parseHostList } from '../config/database-url.js';
import type { Config } from '../config.js';
import { parseDatabaseJson } from '../json/exact.js';
import type { Log } from '../logger.js';
import { endWhenLost } from './lost-connection.js';
import { StatementNames, usePreparedStatements } from './prepared-statements.js';
import { PrimaryLocator } from './primary-locator.js';
import type { Database } from './schema.js';
import { parseTimestamptz, TIMESTAMPTZ_OID } from './timestamp-parser.js';

export type Db = Kysely<Database>;

export interface DatabaseHandle {
  db: Db;
  pool: pg.Pool;
  close(): Promise<void>;
}

type PoolSettings = Pick<Config, 'poolSize' | 'statementTimeoutMs' | 'connectTimeoutMs'> &
  Partial<Pick<Config, 'preparedStatements' | 'dbPooler'>>;

const JSON_OID = 114;
const JSONB_OID = 3802;

/**
 * json and jsonb come back with their numbers exact (json/exact.ts): a payload's 9007199254740993
 * reaches the worker as sent, not as the nearest double. timestamptz is read by a faster parser
 * that answers the same Dates (db/timestamp-parser.ts).
 */
const types = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === JSON_OID || oid === JSONB_OID
      ? parseDatabaseJson
      : oid === TIMESTAMPTZ_OID && format !== 'binary'
        ? parseTimestamptz
        : pg.types.getTypeParser(oid, format as 'text')) as typeof pg.types.getTypeParser,
};

/**
 * What a pool is for, which decides how the planner may run its statements.
 *
 * `requests`: the API's statements. The ring's partitions (jobs/ring.ts) go from empty to
 * thousands of rows within seconds, and every truncation makes each session plan its statements
 * again, often while some partition is empty: the planner then picks sequential scans and hash or
 * merge joins for the probes by id (ack, renew, the claim's write-back) and keeps those generic plans
 * after the partition has filled, scanning thousands of rows per probe (measured with the ring's
 * prototypes: docs/adr/0005-storage-ring.md, "Plans: what the prototypes taught"). Every such statement
 * has exactly one index to probe by (the primary key), so these sessions forbid the alternatives.
 * `jit = off` goes with it: a forbidden plan node adds a huge cost on PostgreSQL before 18, which would
 * otherwise trigger JIT compilation of short statements.
 *
 * They also always take the generic plan of a prepared statement (prepared-statements.ts). The ack's
 * custom plans see the batch (how many ids, which slots) and so always looked cheaper than its generic
 * plan: PostgreSQL's plan cache re-planned the ack on every execution, forever (pg_prepared_statements
 * counted no generic execution), at about twice the PostgreSQL CPU of the generic plan
 * (docs/benchmarks.md, "What was tried and what it gave", row "Generic plans in the request pool"). A
 * statement whose best plan depends on which filters are given is written as one text per filter
 * instead (jobs/list.ts, jobs/redrive.ts). test/db/plans.test.ts checks what the generic plans are, and
 * that no hot statement is re-planned.
 *
 * `maintenance`: the leader's duties and migrations, whose reads of whole partitions or tables
 * should be sequential scans; only JIT is off, as befits short statements.
 */
export type PoolRole = 'requests' | 'maintenance';

const PLANNER_SETTINGS: Record<PoolRole, Record<string, string>> = {
  requests: {
    enable_seqscan: 'off',
    enable_hashjoin: 'off',
    enable_mergejoin: 'off',
    jit: 'off',
    plan_cache_mode: 'force_generic_plan',
  },
  maintenance: { jit: 'off' },
};

/**
 * Session settings for every connection Baton opens: the planner's for its role, and bounds on a
 * statement and on a transaction left idle, since a stuck statement or a transaction left open can
 * hold row locks (and hold back vacuum on the live table).
 *
 * Sent at connect, as startup parameters, to PostgreSQL itself. A pooler refuses those (PgBouncer:
 * "unsupported startup parameter"), so behind one (BATON_DB_POOLER) none is sent: in session mode
 * each connection SETs them first (sessionSetup), and in transaction mode, where a SET would stay
 * on whichever server connection ran it and reach other clients, the timeouts must be the role's
 * own settings, which start-up checks (db/session-settings.ts), and the planner's are left as they
 * are: statements then go unnamed and are planned each time, so no plan made while a partition of the
 * ring was empty is kept (docs/configuration.md, "Behind a connection pooler").
 */
function sessionSettings(role: PoolRole, statementTimeoutMs: number): Record<string, string> {
  return {
    ...PLANNER_SETTINGS[role],
    statement_timeout: String(statementTimeoutMs),
    idle_in_transaction_session_timeout: String(statementTimeoutMs),
  };
}

/** The SET statements (one simple query) that give a session behind a session pooler its settings. */
function sessionSetup(role: PoolRole, statementTimeoutMs: number): string {
  return Object.entries(sessionSettings(role, statementTimeoutMs))
    .map(([name, value]) => `SET ${name} = '${value}'`)
    .join('; ');
}

/** The planner's settings as startup parameters (`-c name=value`), for PostgreSQL itself. */
const plannerOptions = (role: PoolRole) =>
  Object.entries(PLANNER_SETTINGS[role])
    .map(([name, value]) => `-c ${name}=${value}`)
    .join(' ');

export function connectionOptions(
  url: string,
  settings: PoolSettings,
  applicationName = 'baton',
  role: PoolRole = 'requests',
) {
  const atConnect =
    (settings.dbPooler ?? 'none') === 'none'
      ? {
          options: plannerOptions(role),
          statement_timeout: settings.statementTimeoutMs,
          idle_in_transaction_session_timeout: settings.statementTimeoutMs,
        }
      : {};
  return {
    ...connectionTarget(url, settings),
    application_name: applicationName,
    ...atConnect,
    connectionTimeoutMillis: settings.connectTimeoutMs,
    // statement_timeout is enforced by the server; if the network itself goes silent, this bounds
    // the wait on our side so a request cannot hang past it.
    query_timeout: settings.statementTimeoutMs + 2000,
    keepAlive: true,
    types,
  } satisfies pg.ClientConfig;
}

/** One locator per database URL in the process, so every pool and connection agrees on the primary. */
const locators = new Map<string, PrimaryLocator>();

/**
 * Where connections go: the URL itself when it names one host; with several, the URL's first host
 * for node-postgres to parse and a socket that goes to the primary (db/primary-locator.ts).
 */
function connectionTarget(
  url: string,
  settings: PoolSettings,
): Pick<pg.ClientConfig, 'connectionString' | 'stream'> {
  const list = parseHostList(url);
  if (list.hosts.length <= 1) return { connectionString: url };
  let locator = locators.get(url);
  if (!locator) {
    locator = new PrimaryLocator(list, {
      application_name: 'baton-locate',
      connectionTimeoutMillis: settings.connectTimeoutMs,
      types,
    });
    locators.set(url, locator);
  }
  return { connectionString: list.url, stream: locator.socketFactory() };
}

export function createDatabase(
  url: string,
  settings: PoolSettings,
  log: Log,
  role: PoolRole = 'requests',
): DatabaseHandle {
  const pool = new pg.Pool({
    ...connectionOptions(url, settings, role === 'requests' ? 'baton' : 'baton-maintenance', role),
    max: settings.poolSize,
    idleTimeoutMillis: 30_000,
  });
  // An idle client whose server connection dies emits 'error' on the pool; unhandled, that would
  // crash the process. The pool drops the client and the next query opens a fresh one.
  // One short line: a database shutting down ends every idle connection at once.
  pool.on('error', (err: Error & { code?: string }) =>
    log.warn({ code: err.code, error: err.message }, 'idle database connection failed'),
  );
  // A client borrowed by Kysely has no pool listener while it runs a query, and node-postgres emits
  // 'error' on a connection lost mid-query as well as rejecting the query. Without a listener of our
  // own that event would crash the process; the query's rejection already reaches the caller.
  // Statements with parameters go out as named prepared statements (see prepared-statements.ts).
  const names = new StatementNames();
  const open = new Set<pg.PoolClient>();
  const setup = settings.dbPooler === 'session' ? sessionSetup(role, settings.statementTimeoutMs) : undefined;
  // Named statements outlive the transaction that prepared them: a transaction pooler hands the
  // next one to another server connection, which does not know them (PgBouncer before 1.21).
  const prepared = settings.preparedStatements ?? settings.dbPooler !== 'transaction';
  pool.on('connect', (client) => {
    open.add(client);
    client.once('end', () => open.delete(client));
    client.on('error', () => {});
    // Queued before anything the pool's borrower sends: a client runs its queries in order.
    if (setup) client.query(setup).catch(() => {});
    if (prepared) usePreparedStatements(client, names);
    endWhenLost(client);
  });
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
  let closed: Promise<void> | undefined;
  return {
    db,
    pool,
    close: () => {
      closed ??= (async () => {
        await db.destroy();
        // Kysely ends the pool only if it ever ran a query on it; a pool used directly (a lock's
        // session, a release step) is ended here.
        if (!pool.ending) await pool.end();
        await untilEnded(open, CLOSE_WAIT_MS);
      })();
      return closed;
    },
  };
}

/** How long a closing pool waits for its connections to be closed by the server (then goes on). */
const CLOSE_WAIT_MS = 2000;

/**
 * A pool's end resolves once it has asked each connection to end, not once they have: the server
 * may still hold them. Waiting for each to close lets a caller that then stops the database (the
 * embedded one at shutdown) find none left; otherwise its shutdown ends them, and their pool
 * reports a failed idle connection on a clean stop.
 */
async function untilEnded(clients: Set<pg.PoolClient>, ms: number): Promise<void> {
  if (clients.size === 0) return;
  let timer: NodeJS.Timeout | undefined;
  const ended = Promise.all([...clients].map((c) => new Promise<void>((r) => c.once('end', () => r()))));
  await Promise.race([ended, new Promise<void>((r) => (timer = setTimeout(r, ms)))]);
  clearTimeout(timer);
}
