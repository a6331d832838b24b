import fs from 'node:fs';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BatonApp } from '../../src/app.js';
import { sha256 } from '../../src/auth/api-keys.js';
import { rearmExpiredLeases } from '../../src/maintenance/rearm.js';
import { createTestApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';

/**
 * The API document tells the whole truth: every status a route answers is declared for that
 * operation (with the problem schema for errors), and every time a response carries, from SQL or
 * from JavaScript, is RFC 3339 UTC with milliseconds and `Z` (what strict generated clients accept).
 */
const database = useTestDatabase();
const doc = JSON.parse(fs.readFileSync('openapi/openapi.json', 'utf8'));
const ISO_MILLIS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

const key = (name: string, scopes: string[]) => ({ name, sha256: sha256(name).toString('hex'), scopes });
const KEYS = JSON.stringify([key('admin', ['admin']), key('producer', ['producer'])]);

type Method = 'GET' | 'POST' | 'PUT' | 'DELETE';
interface Operation {
  id: string;
  method: Method;
  path: string;
  responses: Record<string, { content?: Record<string, { schema: unknown }> }>;
}
const operations: Operation[] = Object.entries<Record<string, any>>(doc.paths).flatMap(([path, item]) =>
  Object.entries<any>(item).map(([method, op]) => ({
    id: op.operationId,
    method: method.toUpperCase() as Method,
    path,
    responses: op.responses,
  })),
);

/** A schema's $ref resolved against the document. */
function resolve(schema: any): any {
  if (schema?.$ref) return resolve(doc.components.schemas[schema.$ref.replace('#/components/schemas/', '')]);
  return schema;
}

/** Every string the schema calls a date-time, at its path in the value. */
function timesIn(schema: any, value: unknown, at = ''): [string, unknown][] {
  const s = resolve(schema);
  if (!s || value === null || value === undefined) return [];
  if (s.anyOf || s.oneOf) return (s.anyOf ?? s.oneOf).flatMap((option: any) => timesIn(option, value, at));
  if (s.format === 'date-time') return [[at, value]];
  if (Array.isArray(value) && s.items) return value.flatMap((v, i) => timesIn(s.items, v, `${at}[${i}]`));
  if (typeof value === 'object' && s.properties) {
    return Object.entries(s.properties).flatMap(([name, sub]) =>
      timesIn(sub, (value as Record<string, unknown>)[name], `${at}.${name}`),
    );
  }
  return [];
}

describe('every answer is declared, and every time is ISO with milliseconds and Z', () => {
  let app: BatonApp;
  const seen: { op: Operation; status: number; type: string; body: string }[] = [];

  beforeAll(async () => {
    app = await createTestApp(database, { BATON_API_KEYS: KEYS, BATON_OPEN_ENDPOINTS: 'none' });
  });
  afterAll(() => app.close());

  const as = (who: string | undefined) => (who ? { authorization: `Bearer ${who}` } : {});

  async function call(
    op: Operation,
    opts: {
      params?: Record<string, string>;
      query?: string;
      body?: unknown;
      raw?: string;
      type?: string;
      who?: string;
    },
  ) {
    const url =
      op.path.replace(/\{(\w+)\}/g, (_, name: string) => encodeURIComponent(opts.params?.[name] ?? '')) +
      (opts.query ? `?${opts.query}` : '');
    const payload = opts.raw ?? (opts.body === undefined ? undefined : JSON.stringify(opts.body));
    const res = await app.inject({
      method: op.method,
      url,
      headers: {
        ...as(opts.who === undefined ? 'admin' : opts.who || undefined),
        ...(payload === undefined ? {} : { 'content-type': opts.type ?? 'application/json' }),
      },
      ...(payload === undefined ? {} : { payload }),
    });
    seen.push({
      op,
      status: res.statusCode,
      type: String(res.headers['content-type'] ?? ''),
      body: res.body,
    });
    return res;
  }

  /** A job claimed now, for the lease routes. */
  async function claimed(queue = 'resp.q') {
    // An operation before may have paused the queue.
    await app.inject({ method: 'POST', url: `/v1/queues/${queue}/resume`, headers: as('admin') });
    await app.inject({
      method: 'POST',
      url: `/v1/queues/${queue}/jobs`,
      headers: as('admin'),
      payload: { payload: 1 },
    });
    const res = await app.inject({
      method: 'POST',
      url: `/v1/queues/${queue}/claim`,
      headers: as('admin'),
      payload: { lease_ms: 60_000 },
    });
    return res.json().jobs[0] as { id: string; lease_token: string };
  }

  it('drives each operation into each answer it can give', async () => {
    const missing = { id: '999999999', lease_token: '00000000-0000-4000-8000-000000000000' };
    for (const op of operations) {
      const job = await claimed();
      const params = { queue: 'resp.q', id: job.id, name: 'resp-schedule', group: 'resp:group' };
      const lease = { lease_token: job.lease_token };
      const valid: Record<string, { body?: unknown; query?: string }> = {
        enqueueJob: { body: { payload: { n: 1 } } },
        enqueueJobs: { body: { jobs: [{ payload: 1 }] } },
        claimJobs: { body: { max_jobs: 1 } },
        renewLease: { body: lease },
        renewLeases: { body: { renewals: [{ id: job.id, ...lease }] } },
        ackJob: { body: lease },
        ackJobs: { body: { acks: [{ id: job.id, ...lease }] } },
        nackJob: { body: lease },
        putQueue: { body: {} },
        redriveQueue: { body: { all: true } },
        listJobs: { query: 'state=ready' },
        putSchedule: { body: { queue: 'resp.q', cron: '@daily' } },
        putGroup: { body: { weight: 2 } },
        listGroups: { query: 'limit=10' },
      };
      const ok = valid[op.id] ?? {};
      await call(op, { params, ...ok });
      await call(op, { params, ...ok, who: '' });
      await call(op, { params, ...ok, who: 'producer' });
      if (op.path.includes('{')) {
        await call(op, {
          params: { queue: 'bad name!', id: '0x1', name: 'bad name!', group: 'bad group' },
          ...ok,
        });
        await call(op, {
          params: {
            queue: 'q'.repeat(300),
            id: '1'.repeat(300),
            name: 's'.repeat(300),
            group: 'g'.repeat(300),
          },
          ...ok,
        });
        await call(op, {
          params: { queue: 'resp.none', id: missing.id, name: 'resp-none', group: 'resp:group' },
          ...ok,
        });
      }
      if (ok.query) await call(op, { params, query: 'state=nope&limit=0' });
      if (ok.body !== undefined) {
        await call(op, { params, body: { unknown_field: 1 } });
        await call(op, { params, raw: 'payload=1', type: 'text/plain' });
        await call(op, { params, raw: JSON.stringify({ payload: 'x'.repeat(17 * 1024 * 1024) }) });
        await call(op, { params, body: JSON.parse(JSON.stringify(ok.body).replaceAll(job.id, missing.id)) });
        await call(op, {
          params,
          body: JSON.parse(JSON.stringify(ok.body).replaceAll(job.lease_token, missing.lease_token)),
        });
      }
    }
    // A queue with live jobs refuses a plain delete (409), and a finished job refuses cancel (409).
    const del = operations.find((o) => o.id === 'deleteQueue')!;
    await call(del, { params: { queue: 'resp.q' } });
    const done = await claimed();
    await app.inject({
      method: 'POST',
      url: `/v1/jobs/${done.id}/ack`,
      headers: as('admin'),
      payload: { lease_token: done.lease_token },
    });
    await call(operations.find((o) => o.id === 'cancelJob')!, { params: { id: done.id } });

    const undeclared = seen
      .filter(({ op, status }) => !op.responses[String(status)])
      .map(({ op, status, body }) => `${op.method} ${op.path} → ${status} ${body.slice(0, 120)}`);
    expect([...new Set(undeclared)]).toEqual([]);
    for (const { op, status, type } of seen) {
      if (status >= 400) expect(type, `${op.id} ${status}`).toMatch(/^application\/problem\+json/);
    }
    const statuses = new Set(seen.map((s) => s.status));
    for (const status of [200, 201, 400, 401, 403, 404, 409, 413, 414, 415])
      expect(statuses).toContain(status);
  }, 120_000);

  it('every time in every response is UTC with milliseconds and Z, including SQL-built error times', async () => {
    // A job whose lease expired carries an error entry built by the re-arm statement.
    const expired = await claimed('resp.times');
    await sql`UPDATE baton.jobs SET lease_expires_at = now() - interval '1 second' WHERE id = ${expired.id}`.execute(
      database.db,
    );
    await rearmExpiredLeases(database.db, 100);
    const get = operations.find((o) => o.id === 'getJob')!;
    await call(get, { params: { id: expired.id } });
    const list = operations.find((o) => o.id === 'listJobs')!;
    for (const state of ['ready', 'claimed', 'completed', 'dead']) {
      await call(list, { params: { queue: 'resp.q' }, query: `state=${state}&include_payload=true` });
    }
    let checked = 0;
    for (const { op, status, type, body } of seen) {
      const schema = op.responses[String(status)]?.content?.['application/json']?.schema;
      if (!schema || !type.startsWith('application/json')) continue;
      for (const [at, value] of timesIn(schema, JSON.parse(body))) {
        expect(value, `${op.id} ${status} ${at}`).toMatch(ISO_MILLIS);
        checked++;
      }
    }
    const job = JSON.parse(seen.find((s) => s.op.id === 'getJob' && s.body.includes('lease expired'))!.body);
    expect(job.last_error.at).toMatch(ISO_MILLIS);
    expect(checked).toBeGreaterThan(100);
  });
});
