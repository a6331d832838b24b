import { randomBytes } from 'node:crypto';
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, inject } from 'vitest';
import type { Database } from '../../src/db/schema.js';

export interface TestDatabase {
  name: string;
  url: string;
  /** A Kysely handle for direct assertions on the database state. */
  db: Kysely<Database>;
  /** Raw pg pool, for holding transactions open or inspecting locks. */
  pool: pg.Pool;
  drop(): Promise<void>;
}

function urlFor(name: string): string {
  const url = new URL(inject('adminUrl'));
  url.pathname = `/${name}`;
  return url.toString();
}

/** A fresh database copied from the migrated template. */
export async function createTestDatabase(opts: { migrated?: boolean } = {}): Promise<TestDatabase> {
  const template = inject('templateDatabase');
  const name = `${template.replace('tpl', 't')}_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: inject('adminUrl') });
  await admin.connect();
  try {
    if (opts.migrated === false) await admin.query(`CREATE DATABASE ${name}`);
    else await admin.query(`CREATE DATABASE ${name} TEMPLATE ${template}`);
  } finally {
    await admin.end();
  }
  const url = urlFor(name);
  const pool = new pg.Pool({ connectionString: url, max: 10 });
  pool.on('error', () => {});
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
  return {
    name,
    url,
    db,
    pool,
    drop: async () => {
      await db.destroy();
      const again = new pg.Client({ connectionString: inject('adminUrl') });
      await again.connect();
      await again.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await again.end();
    },
  };
}

/** One database for the whole test file, created before its tests and dropped after them. */
export function useTestDatabase(opts: { migrated?: boolean } = {}): TestDatabase {
  let current: TestDatabase | undefined;
  beforeAll(async () => {
    current = await createTestDatabase(opts);
  });
  afterAll(async () => {
    await current?.drop();
  });
  return new Proxy({} as TestDatabase, {
    get(_, prop) {
      if (!current) throw new Error('test database used outside a test (before beforeAll ran)');
      return current[prop as keyof TestDatabase];
    },
  });
}
