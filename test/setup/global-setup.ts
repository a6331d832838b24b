import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import type { TestProject } from 'vitest/node';
import { createDatabase } from '../../src/db/database.js';
import { startEmbeddedPostgres } from '../../src/db/embedded-postgres.js';
import { migrateToLatest } from '../../src/db/migrate.js';
import { redactUrl } from '../../src/startup-errors.js';
import { freePort } from '../support/ports.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** A database on the test server from which test databases are created (CREATE DATABASE rights). */
    adminUrl: string;
    /** Name of the migrated template each test file copies its own database from. */
    templateDatabase: string;
    /** Where the server came from: env, testcontainers or embedded. */
    databaseSource: string;
    /** One line for people: which PostgreSQL this run uses (printed at the start and the end). */
    databaseDescription: string;
  }
}

const quietLog = {
  info: () => {},
  warn: (obj: object, msg: string) => console.warn(msg, obj),
  error: (obj: object, msg: string) => console.error(msg, obj),
};

/**
 * Finds a PostgreSQL server for the run: TEST_DATABASE_URL or DATABASE_URL when set, else a
 * testcontainers container when a container runtime answers, else an embedded PostgreSQL.
 * Migrates a template database once; each test file then copies it (CREATE DATABASE ... TEMPLATE),
 * which takes milliseconds and isolates files from each other.
 */
interface Server {
  adminUrl: string;
  source: string;
  /** Where it came from, for people: the variable, the container image or the data folder. */
  origin: string;
  stop: () => Promise<void>;
}

async function findServer(): Promise<Server> {
  const variable = process.env.TEST_DATABASE_URL ? 'TEST_DATABASE_URL' : 'DATABASE_URL';
  const given = process.env[variable];
  if (given) return { adminUrl: given, source: 'env', origin: `from ${variable}`, stop: async () => {} };

  try {
    const { PostgreSqlContainer } = await import('@testcontainers/postgresql');
    const image = 'postgres:17-alpine';
    const container = await new PostgreSqlContainer(image).start();
    return {
      adminUrl: container.getConnectionUri(),
      source: 'testcontainers',
      origin: `in a testcontainers container (${image})`,
      stop: async () => void (await container.stop()),
    };
  } catch (err) {
    if (!/container runtime/i.test(String((err as Error).message)))
      console.warn('testcontainers failed:', err);
  }

  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'baton-test-pg-'));
  await fs.chmod(dir, 0o755);
  const embedded = await startEmbeddedPostgres({
    dataDir: path.join(dir, 'pgdata'),
    port: await freePort(),
    log: quietLog,
    database: 'postgres',
  });
  return {
    adminUrl: embedded.url,
    source: 'embedded',
    origin: `embedded (embedded-postgres, data in ${dir}; TEST_DATABASE_URL and DATABASE_URL unset, and testcontainers could not start a container)`,
    stop: async () => {
      await embedded.stop();
      await fs.rm(dir, { recursive: true, force: true });
    },
  };
}

export default async function setup(project: TestProject) {
  const server = await findServer();
  const template = `baton_tpl_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: server.adminUrl });
  await admin.connect();
  const { server_version } = (await admin.query<{ server_version: string }>('SHOW server_version')).rows[0]!;
  const description = `PostgreSQL ${server_version} at ${redactUrl(server.adminUrl)}, ${server.origin}`;
  console.log(`Tests use ${description}`);
  await admin.query(`CREATE DATABASE ${template}`);
  const url = new URL(server.adminUrl);
  url.pathname = `/${template}`;
  const handle = createDatabase(
    url.toString(),
    { poolSize: 2, statementTimeoutMs: 60_000, connectTimeoutMs: 10_000 },
    quietLog,
  );
  await migrateToLatest(handle.db);
  await handle.close();

  project.provide('adminUrl', server.adminUrl);
  project.provide('templateDatabase', template);
  project.provide('databaseSource', server.source);
  project.provide('databaseDescription', description);

  return async () => {
    // Drop the template and any test database a crashed file left behind.
    const left = await admin.query<{ datname: string }>(
      `SELECT datname FROM pg_database WHERE datname = $1 OR datname LIKE $2`,
      [template, `${template.replace('tpl', 't')}%`],
    );
    for (const { datname } of left.rows) {
      await admin
        .query(`DROP DATABASE IF EXISTS ${admin.escapeIdentifier(datname)} WITH (FORCE)`)
        .catch(() => {});
    }
    await admin.end();
    await server.stop();
  };
}
