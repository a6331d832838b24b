import pg from 'pg';

/**
 * The bench's own databases on the machine's PostgreSQL, one per system so that no system's tables,
 * locks or autovacuum runs share a catalog with another's. They are dropped and re-created at the
 * start of every bench run; nothing else on the server is touched.
 */

/** Server (no database name). Override with BENCH_PG_URL, e.g. postgres://user@host:5432 */
export const SERVER_URL = (process.env.BENCH_PG_URL ?? 'postgres://postgres@127.0.0.1:5432').replace(
  /\/$/,
  '',
);

/**
 * BENCH_DB_PREFIX renames them (`<prefix>_baton`, `<prefix>_pgboss`, `<prefix>_graphile`), so two
 * people benchmarking on one shared server do not drop each other's databases.
 */
const PREFIX = process.env.BENCH_DB_PREFIX;
if (PREFIX !== undefined && !/^[a-z_][a-z0-9_]{0,40}$/.test(PREFIX))
  throw new Error(`BENCH_DB_PREFIX must be a lower-case SQL identifier, got ${JSON.stringify(PREFIX)}`);
export const DATABASES = {
  baton: PREFIX ? `${PREFIX}_baton` : 'baton_bench',
  pgBoss: PREFIX ? `${PREFIX}_pgboss` : 'pgboss_bench',
  graphile: PREFIX ? `${PREFIX}_graphile` : 'graphile_bench',
} as const;

export function databaseUrl(name: string): string {
  return `${SERVER_URL}/${name}`;
}

/** Drop (closing any leftover sessions of a previous run) and create one of the bench's databases. */
export async function recreateDatabase(name: string): Promise<void> {
  if (!(Object.values(DATABASES) as string[]).includes(name))
    throw new Error(`${name} is not a bench database`);
  const admin = new pg.Client({ connectionString: databaseUrl('postgres') });
  await admin.connect();
  try {
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
}

/** A small pool for the bench's own SQL (setup, counts, statistics), never on a measured path. */
export function adminPool(name: string, max = 4): pg.Pool {
  const pool = new pg.Pool({ connectionString: databaseUrl(name), max, application_name: 'bench-admin' });
  pool.on('error', () => {});
  return pool;
}

export async function serverVersion(): Promise<string> {
  const admin = new pg.Client({ connectionString: databaseUrl('postgres') });
  await admin.connect();
  try {
    const { rows } = await admin.query<{ v: string }>('SELECT version() AS v');
    return rows[0]!.v;
  } finally {
    await admin.end();
  }
}

/** Wait until `check` is true, polling every `everyMs`; returns the time it became true. */
export async function waitUntil(
  check: () => Promise<boolean>,
  timeoutMs: number,
  everyMs = 5,
): Promise<number> {
  const deadline = performance.now() + timeoutMs;
  while (performance.now() < deadline) {
    if (await check()) return performance.now();
    await new Promise((r) => setTimeout(r, everyMs));
  }
  throw new Error(`condition not met within ${timeoutMs} ms`);
}
