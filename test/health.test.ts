import { readFileSync } from 'node:fs';
import { Type } from 'typebox';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrations } from '../migrations/index.js';
import { type BatonApp, buildApp } from '../src/app.js';
import { createTestApp, testConfig, useTestApp } from './support/app.js';
import { useTestDatabase } from './support/database.js';
import { TcpProxy } from './support/tcp-proxy.js';

const database = useTestDatabase();
const app = useTestApp(database);

describe('health', () => {
  it('/healthz answers 200 while the process runs, with its release and the schema it runs', async () => {
    const res = await app.inject({ method: 'GET', url: '/healthz' });
    expect(res.statusCode).toBe(200);
    const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'));
    expect(res.json()).toEqual({
      status: 'ok',
      version: pkg.version,
      schema: Object.keys(migrations).at(-1),
    });
  });

  it("/readyz answers 200 when the database is reachable and migrated, with the database's schema", async () => {
    const res = await app.inject({ method: 'GET', url: '/readyz' });
    expect(res.statusCode).toBe(200);
    const newest = Object.keys(migrations).at(-1);
    expect(res.json()).toMatchObject({ status: 'ready', schema: newest, database_schema: newest });
  });

  it("/readyz stays ready on a database a newer release has migrated, and names the database's schema", async () => {
    // A newer release's migration, as a rolling upgrade leaves it for the replicas still on this one.
    const ahead = '9999_a_newer_release';
    await database.pool.query(
      'INSERT INTO baton.kysely_migration (name, timestamp) VALUES ($1, now()::text)',
      [ahead],
    );
    try {
      const res = await app.inject({ method: 'GET', url: '/readyz' });
      expect(res.statusCode).toBe(200);
      expect(res.json()).toMatchObject({ schema: Object.keys(migrations).at(-1), database_schema: ahead });
    } finally {
      await database.pool.query('DELETE FROM baton.kysely_migration WHERE name = $1', [ahead]);
    }
  });

  it('echoes a caller-supplied request id and makes one up otherwise', async () => {
    const given = await app.inject({
      method: 'GET',
      url: '/healthz',
      headers: { 'x-request-id': 'abc-123' },
    });
    expect(given.headers['x-request-id']).toBe('abc-123');
    const made = await app.inject({ method: 'GET', url: '/healthz' });
    expect(made.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
  });
});

describe('/readyz through a database outage', () => {
  let proxy: TcpProxy;
  let outageApp: BatonApp;
  beforeAll(async () => {
    proxy = await TcpProxy.start(database.url);
    outageApp = await createTestApp(
      { url: proxy.urlFor(database.url) },
      { BATON_DB_CONNECT_TIMEOUT_MS: '500' },
    );
  });
  afterAll(async () => {
    await outageApp.close();
    await proxy.close();
  });

  it('turns 503 problem+json when the database is unreachable, and back to 200 when it returns', async () => {
    expect((await outageApp.inject({ method: 'GET', url: '/readyz' })).statusCode).toBe(200);

    await proxy.cut();
    const down = await outageApp.inject({ method: 'GET', url: '/readyz' });
    expect(down.statusCode).toBe(503);
    expect(down.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(down.headers['retry-after']).toBe('1');
    expect(down.json()).toMatchObject({
      status: 503,
      code: 'unavailable',
      type: 'urn:baton:problem:unavailable',
    });

    await proxy.restore();
    const up = await outageApp.inject({ method: 'GET', url: '/readyz' });
    expect(up.statusCode).toBe(200);
  });

  it('reports unapplied migrations as not ready', async () => {
    const [last] = (
      await database.pool.query(`DELETE FROM baton.kysely_migration WHERE name = (
        SELECT max(name) FROM baton.kysely_migration) RETURNING name`)
    ).rows;
    try {
      const res = await outageApp.inject({ method: 'GET', url: '/readyz' });
      expect(res.statusCode).toBe(503);
      expect(res.json().detail).toBe(`migrations not applied: ${last.name}`);
    } finally {
      await database.pool.query(
        `INSERT INTO baton.kysely_migration (name, timestamp) VALUES ($1, now()::text)`,
        [last.name],
      );
    }
  });
});

describe('problem+json', () => {
  it('answers an unknown route with a 404 problem', async () => {
    const res = await app.inject({ method: 'GET', url: '/v1/nothing-here?x=1' });
    expect(res.statusCode).toBe(404);
    expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(res.json()).toEqual({
      type: 'urn:baton:problem:not_found',
      title: 'Not found',
      status: 404,
      code: 'not_found',
      detail: 'no route for GET /v1/nothing-here',
      instance: '/v1/nothing-here',
      request_id: res.headers['x-request-id'],
    });
  });

  it('names the invalid field of a request body', async () => {
    // Built without ready() so the test can add a route of its own.
    const fresh = await buildApp({ config: testConfig(), databaseUrl: database.url });
    fresh.post(
      '/echo',
      {
        // Every route must declare who may call it (see plugins/auth.ts).
        config: { access: { scopes: ['producer'] } },
        schema: {
          body: Type.Object(
            {
              items: Type.Array(
                Type.Object({ n: Type.Integer({ maximum: 10 }) }, { additionalProperties: false }),
              ),
            },
            { additionalProperties: false },
          ),
        },
      },
      async (req) => req.body,
    );
    try {
      const bad = await fresh.inject({
        method: 'POST',
        url: '/echo',
        payload: { items: [{ n: 1 }, { n: 11 }] },
      });
      expect(bad.statusCode).toBe(400);
      expect(bad.headers['content-type']).toMatch(/^application\/problem\+json/);
      expect(bad.json()).toMatchObject({
        code: 'validation_failed',
        status: 400,
        detail: 'items[1].n must be <= 10',
        errors: [{ field: 'items[1].n', message: 'must be <= 10' }],
      });

      const unknown = await fresh.inject({
        method: 'POST',
        url: '/echo',
        payload: { items: [], extra: true },
      });
      expect(unknown.json()).toMatchObject({
        code: 'validation_failed',
        detail: 'extra is not a known field',
      });

      const missing = await fresh.inject({ method: 'POST', url: '/echo', payload: {} });
      expect(missing.json()).toMatchObject({ detail: 'items is required' });

      // Bodies are not coerced: "5" is not a number.
      const text = await fresh.inject({ method: 'POST', url: '/echo', payload: { items: [{ n: '5' }] } });
      expect(text.json()).toMatchObject({ detail: 'items[0].n must be integer' });

      const malformed = await fresh.inject({
        method: 'POST',
        url: '/echo',
        headers: { 'content-type': 'application/json' },
        payload: '{"items": [',
      });
      expect(malformed.statusCode).toBe(400);
      expect(malformed.json()).toMatchObject({ code: 'malformed_json' });
    } finally {
      await fresh.close();
    }
  });
});
