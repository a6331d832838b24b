import { Writable } from 'node:stream';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type BatonApp, buildApp } from '../../src/app.js';
import { sha256 } from '../../src/auth/api-keys.js';
import { createTestApp, loadStartup, testConfig } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';

const database = useTestDatabase();

const SECRETS = {
  producer: 'producer-secret',
  consumer: 'consumer-secret',
  admin: 'admin-secret',
  limited: 'limited-secret',
} as const;
type Who = keyof typeof SECRETS | 'none' | 'wrong';

const KEYS = JSON.stringify([
  { name: 'p', sha256: sha256(SECRETS.producer).toString('hex'), scopes: ['producer'] },
  { name: 'c', sha256: sha256(SECRETS.consumer).toString('hex'), scopes: ['consumer'] },
  { name: 'a', sha256: sha256(SECRETS.admin).toString('hex'), scopes: ['admin'] },
  {
    name: 'l',
    sha256: sha256(SECRETS.limited).toString('hex'),
    scopes: ['producer', 'consumer'],
    queues: ['allowed.*'],
  },
]);

function headers(who: Who): Record<string, string> {
  if (who === 'none') return {};
  if (who === 'wrong') return { authorization: 'Bearer not-a-key' };
  return { authorization: `Bearer ${SECRETS[who]}` };
}

describe('API keys', () => {
  let app: BatonApp;
  const jobs: Record<string, { id: string; lease_token: string }> = {};

  beforeAll(async () => {
    app = await createTestApp(database, { BATON_API_KEYS: KEYS });
    // One claimed job in a queue the limited key may use, one in a queue it may not.
    for (const queue of ['allowed.q', 'other.q']) {
      await app.inject({
        method: 'POST',
        url: `/v1/queues/${queue}/jobs`,
        headers: headers('admin'),
        payload: { payload: 1 },
      });
      const claim = await app.inject({
        method: 'POST',
        url: `/v1/queues/${queue}/claim`,
        headers: headers('admin'),
        payload: {},
      });
      jobs[queue] = claim.json().jobs[0];
      await app.inject({
        method: 'PUT',
        url: `/v1/schedules/sched-${queue}`,
        headers: headers('admin'),
        payload: { queue, cron: '0 0 1 1 *' },
      });
    }
  });
  afterAll(() => app.close());

  type Route = {
    name: string;
    method: 'GET' | 'POST' | 'PUT' | 'DELETE';
    url: (q: string) => string;
    body?: (q: string) => object;
    allowed: Who[];
  };
  const job = (q: string) => jobs[q]!;
  const ROUTES: Route[] = [
    {
      name: 'enqueue',
      method: 'POST',
      url: (q) => `/v1/queues/${q}/jobs`,
      body: () => ({ payload: 1 }),
      allowed: ['producer', 'admin', 'limited'],
    },
    {
      name: 'enqueue batch',
      method: 'POST',
      url: (q) => `/v1/queues/${q}/jobs/batch`,
      body: () => ({ jobs: [{ payload: 1 }] }),
      allowed: ['producer', 'admin', 'limited'],
    },
    {
      name: 'claim',
      method: 'POST',
      url: (q) => `/v1/queues/${q}/claim`,
      body: () => ({ max_jobs: 1 }),
      allowed: ['consumer', 'admin', 'limited'],
    },
    {
      name: 'get job',
      method: 'GET',
      url: (q) => `/v1/jobs/${job(q).id}`,
      allowed: ['producer', 'consumer', 'admin', 'limited'],
    },
    {
      name: 'overview',
      method: 'GET',
      url: () => '/v1/overview',
      allowed: ['producer', 'consumer', 'admin', 'limited'],
    },
    {
      name: 'list workers',
      method: 'GET',
      url: () => '/v1/workers',
      allowed: ['producer', 'consumer', 'admin', 'limited'],
    },
    {
      name: 'search jobs',
      method: 'GET',
      url: (q) => `/v1/jobs?state=dead&queue=${q}`,
      allowed: ['producer', 'consumer', 'admin', 'limited'],
    },
    {
      name: 'bulk action',
      method: 'POST',
      url: () => '/v1/jobs/bulk',
      // Redrive: the job is not dead, so nothing changes for the rows after this one.
      body: (q) => ({ action: 'redrive', ids: [job(q).id] }),
      // A limited admin key's bulk actions: test/jobs/bulk.test.ts.
      allowed: ['admin'],
    },
    {
      name: 'job parents',
      method: 'GET',
      url: (q) => `/v1/jobs/${job(q).id}/parents`,
      allowed: ['producer', 'consumer', 'admin', 'limited'],
    },
    {
      name: 'job children',
      method: 'GET',
      url: (q) => `/v1/jobs/${job(q).id}/children`,
      allowed: ['producer', 'consumer', 'admin', 'limited'],
    },
    {
      name: 'job graph',
      method: 'GET',
      url: (q) => `/v1/jobs/${job(q).id}/graph`,
      allowed: ['producer', 'consumer', 'admin', 'limited'],
    },
    {
      name: 'await job',
      method: 'GET',
      url: (q) => `/v1/jobs/${job(q).id}?wait_ms=1`,
      allowed: ['producer', 'consumer', 'admin', 'limited'],
    },
    {
      name: 'await jobs',
      method: 'POST',
      url: () => '/v1/jobs/await',
      body: (q) => ({ ids: [job(q).id], wait_ms: 1 }),
      allowed: ['producer', 'consumer', 'admin', 'limited'],
    },
    {
      name: 'renew',
      method: 'POST',
      url: (q) => `/v1/jobs/${job(q).id}/renew`,
      body: (q) => ({ lease_token: job(q).lease_token }),
      allowed: ['consumer', 'admin', 'limited'],
    },
    {
      name: 'ack',
      method: 'POST',
      url: (q) => `/v1/jobs/${job(q).id}/ack`,
      body: () => ({ lease_token: '00000000-0000-4000-8000-000000000000' }),
      allowed: ['consumer', 'admin', 'limited'],
    },
    {
      name: 'batch ack',
      method: 'POST',
      url: () => '/v1/jobs/ack',
      body: (q) => ({ acks: [{ id: job(q).id, lease_token: '00000000-0000-4000-8000-000000000000' }] }),
      allowed: ['consumer', 'admin', 'limited'],
    },
    {
      name: 'batch renew',
      method: 'POST',
      url: () => '/v1/jobs/renew',
      body: (q) => ({ renewals: [{ id: job(q).id, lease_token: job(q).lease_token }] }),
      allowed: ['consumer', 'admin', 'limited'],
    },
    {
      name: 'nack',
      method: 'POST',
      url: (q) => `/v1/jobs/${job(q).id}/nack`,
      body: () => ({ lease_token: '00000000-0000-4000-8000-000000000000' }),
      allowed: ['consumer', 'admin', 'limited'],
    },
    { name: 'cancel', method: 'POST', url: () => '/v1/jobs/999999999/cancel', allowed: ['admin'] },
    {
      name: 'list queues',
      method: 'GET',
      url: () => '/v1/queues',
      allowed: ['producer', 'consumer', 'admin', 'limited'],
    },
    {
      name: 'get queue',
      method: 'GET',
      url: (q) => `/v1/queues/${q}`,
      allowed: ['producer', 'consumer', 'admin', 'limited'],
    },
    {
      name: 'queue history',
      method: 'GET',
      url: (q) => `/v1/queues/${q}/history?minutes=5`,
      allowed: ['producer', 'consumer', 'admin', 'limited'],
    },
    {
      name: 'list groups',
      method: 'GET',
      url: (q) => `/v1/queues/${q}/groups?limit=5`,
      allowed: ['producer', 'consumer', 'admin', 'limited'],
    },
    {
      name: 'get group',
      method: 'GET',
      url: (q) => `/v1/queues/${q}/groups/tenant:1`,
      allowed: ['producer', 'consumer', 'admin', 'limited'],
    },
    {
      name: 'put group',
      method: 'PUT',
      url: (q) => `/v1/queues/${q}/groups/tenant:1`,
      body: () => ({ weight: 2 }),
      allowed: ['admin'],
    },
    {
      name: 'delete group',
      method: 'DELETE',
      url: (q) => `/v1/queues/${q}/groups/tenant:1`,
      allowed: ['admin'],
    },
    {
      name: 'whoami',
      method: 'GET',
      url: () => '/v1/whoami',
      allowed: ['producer', 'consumer', 'admin', 'limited'],
    },
    {
      name: 'list jobs',
      method: 'GET',
      url: (q) => `/v1/queues/${q}/jobs?state=ready`,
      allowed: ['producer', 'consumer', 'admin', 'limited'],
    },
    { name: 'put queue', method: 'PUT', url: (q) => `/v1/queues/${q}`, body: () => ({}), allowed: ['admin'] },
    { name: 'pause', method: 'POST', url: (q) => `/v1/queues/${q}/pause`, allowed: ['admin'] },
    { name: 'resume', method: 'POST', url: (q) => `/v1/queues/${q}/resume`, allowed: ['admin'] },
    { name: 'purge', method: 'POST', url: (q) => `/v1/queues/${q}/purge`, allowed: ['admin'] },
    {
      name: 'redrive',
      method: 'POST',
      url: (q) => `/v1/queues/${q}/redrive`,
      body: () => ({ all: true }),
      allowed: ['admin'],
    },
    {
      name: 'announce a worker',
      method: 'PUT',
      url: (q) => `/v1/workers/w-${q}`,
      body: (q) => ({ queues: [q] }),
      allowed: ['consumer', 'admin', 'limited'],
    },
    {
      name: 'forget a worker',
      method: 'DELETE',
      url: (q) => `/v1/workers/w-${q}`,
      allowed: ['consumer', 'admin', 'limited'],
    },
    {
      name: 'start move',
      method: 'POST',
      url: (q) => `/v1/queues/${q}/moves`,
      body: () => ({ destination: 'never-there' }),
      allowed: ['admin'],
    },
    {
      name: 'list moves',
      method: 'GET',
      url: (q) => `/v1/queues/${q}/moves`,
      allowed: ['producer', 'consumer', 'admin', 'limited'],
    },
    {
      name: 'cancel move',
      method: 'POST',
      url: (q) => `/v1/queues/${q}/moves/00000000-0000-4000-8000-000000000000/cancel`,
      allowed: ['admin'],
    },
    {
      name: 'set push',
      method: 'PUT',
      url: (q) => `/v1/queues/${q}/push`,
      // Refused as a loopback address (400) once the key may set it.
      body: () => ({ url: 'http://127.0.0.1:9/jobs' }),
      allowed: ['admin'],
    },
    { name: 'get push', method: 'GET', url: (q) => `/v1/queues/${q}/push`, allowed: ['admin'] },
    {
      name: 'rotate push secret',
      method: 'POST',
      url: (q) => `/v1/queues/${q}/push/rotate-secret`,
      body: () => ({}),
      allowed: ['admin'],
    },
    { name: 'stop push', method: 'DELETE', url: (q) => `/v1/queues/${q}/push`, allowed: ['admin'] },
    { name: 'delete queue', method: 'DELETE', url: () => '/v1/queues/never-there', allowed: ['admin'] },
    {
      name: 'list schedules',
      method: 'GET',
      url: () => '/v1/schedules',
      allowed: ['producer', 'consumer', 'admin', 'limited'],
    },
    {
      name: 'get schedule',
      method: 'GET',
      url: (q) => `/v1/schedules/sched-${q}`,
      allowed: ['producer', 'consumer', 'admin', 'limited'],
    },
    {
      name: 'put schedule',
      method: 'PUT',
      url: (q) => `/v1/schedules/sched-${q}`,
      body: (q) => ({ queue: q, cron: '0 0 1 1 *' }),
      allowed: ['admin'],
    },
    {
      name: 'pause schedule',
      method: 'POST',
      url: (q) => `/v1/schedules/sched-${q}/pause`,
      allowed: ['admin'],
    },
    {
      name: 'resume schedule',
      method: 'POST',
      url: (q) => `/v1/schedules/sched-${q}/resume`,
      allowed: ['admin'],
    },
    {
      name: 'trigger schedule',
      method: 'POST',
      url: (q) => `/v1/schedules/sched-${q}/trigger`,
      allowed: ['admin'],
    },
    { name: 'delete schedule', method: 'DELETE', url: (q) => `/v1/schedules/never-${q}`, allowed: ['admin'] },
  ];
  const WHO: Who[] = ['none', 'wrong', 'producer', 'consumer', 'admin', 'limited'];

  // To a key limited to some queues, a job of another queue is indistinguishable from a missing one.
  const JOB_ROUTES = [
    'get job',
    'job parents',
    'job children',
    'job graph',
    'await job',
    'renew',
    'ack',
    'nack',
    'get schedule',
  ];
  const BATCH_ROUTES = ['batch ack', 'batch renew', 'await jobs'];
  for (const route of ROUTES) {
    for (const who of WHO) {
      for (const queue of ['allowed.q', 'other.q']) {
        const outside = who === 'limited' && queue === 'other.q';
        const expected =
          who === 'none' || who === 'wrong'
            ? 401
            : !route.allowed.includes(who)
              ? 403
              : outside && JOB_ROUTES.includes(route.name)
                ? 404
                : outside && BATCH_ROUTES.includes(route.name)
                  ? 'hidden item'
                  : outside &&
                      ![
                        'list queues',
                        'list workers',
                        'forget a worker',
                        'search jobs',
                        'overview',
                        'delete queue',
                        'cancel',
                        'whoami',
                        'list schedules',
                      ].includes(route.name)
                    ? 403
                    : 'allowed';
        it(`${route.name} with ${who === 'limited' ? `a key limited to allowed.* on ${queue}` : `${who} key`} → ${expected}`, async () => {
          const res = await app.inject({
            method: route.method,
            url: route.url(queue),
            headers: headers(who),
            ...(route.body ? { payload: route.body(queue) } : {}),
          });
          if (expected === 'allowed') {
            expect([401, 403], res.body).not.toContain(res.statusCode);
            expect(res.statusCode).toBeLessThan(500);
          } else if (expected === 'hidden item') {
            expect(res.statusCode, res.body).toBe(200);
            if (route.name === 'await jobs')
              expect(res.json()).toMatchObject({ jobs: [], not_found: [job(queue).id] });
            else expect(res.json().results[0].outcome).toBe('not_found');
          } else {
            expect(res.statusCode, res.body).toBe(expected);
            expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
            const code = { 401: 'unauthorized', 403: 'forbidden', 404: 'not_found' }[expected];
            expect(res.json().code).toBe(code);
            if (expected === 401) expect(res.headers['www-authenticate']).toMatch(/^Bearer realm="baton"/);
          }
        });
      }
    }
  }

  it('the table covers every route of the API document', async () => {
    const doc = (await app.inject({ method: 'GET', url: '/openapi.json' })).json();
    for (const [path, operations] of Object.entries<Record<string, unknown>>(doc.paths)) {
      if (!path.startsWith('/v1/')) continue;
      const pattern = new RegExp(`^${path.replace(/\{[a-z_]+\}/g, '[^/]+')}(\\?.*)?$`);
      for (const method of Object.keys(operations)) {
        const covered = ROUTES.some(
          (r) => r.method === method.toUpperCase() && pattern.test(r.url('allowed.q')),
        );
        expect(covered, `${method.toUpperCase()} ${path}`).toBe(true);
      }
    }
  });

  it('a key limited to some queues sees and touches only the schedules of its queues', async () => {
    const h = headers('limited');
    const listed = await app.inject({ method: 'GET', url: '/v1/schedules', headers: h });
    expect(listed.json().schedules.map((x: { name: string }) => x.name)).toEqual(['sched-allowed.q']);
    const other = await app.inject({ method: 'GET', url: '/v1/schedules/sched-other.q', headers: h });
    expect(other.statusCode).toBe(404);
    expect(other.json().detail).toBe('schedule "sched-other.q" does not exist');
    // Names are one namespace: taking another queue's schedule name over is refused.
    const takeOver = await app.inject({
      method: 'PUT',
      url: '/v1/schedules/sched-other.q',
      headers: h,
      payload: { queue: 'allowed.q', cron: '@daily' },
    });
    expect(takeOver.statusCode).toBe(403);
    // An admin key limited to some queues manages their schedules and nothing else.
    const limitedAdmin = await createTestApp(database, {
      BATON_API_KEYS: JSON.stringify([
        { name: 'la', sha256: sha256('la-secret').toString('hex'), scopes: ['admin'], queues: ['allowed.*'] },
      ]),
    });
    try {
      const la = { authorization: 'Bearer la-secret' };
      const own = { queue: 'allowed.x', cron: '@daily' };
      expect(
        (await limitedAdmin.inject({ method: 'PUT', url: '/v1/schedules/la-own', headers: la, payload: own }))
          .statusCode,
      ).toBe(201);
      const foreign = { queue: 'other.x', cron: '@daily' };
      expect(
        (
          await limitedAdmin.inject({
            method: 'PUT',
            url: '/v1/schedules/la-foreign',
            headers: la,
            payload: foreign,
          })
        ).statusCode,
      ).toBe(403);
      for (const url of ['/v1/schedules/sched-other.q/trigger', '/v1/schedules/sched-other.q/pause']) {
        expect((await limitedAdmin.inject({ method: 'POST', url, headers: la })).statusCode, url).toBe(404);
      }
      expect(
        (await limitedAdmin.inject({ method: 'DELETE', url: '/v1/schedules/sched-other.q', headers: la }))
          .statusCode,
      ).toBe(404);
    } finally {
      await limitedAdmin.close();
    }
    const stillThere = await app.inject({
      method: 'GET',
      url: '/v1/schedules/sched-other.q',
      headers: headers('admin'),
    });
    expect(stillThere.json().paused).toBe(false);
  });

  it('a key limited to some queues lists only those', async () => {
    const res = await app.inject({ method: 'GET', url: '/v1/queues', headers: headers('limited') });
    const names = res.json().queues.map((q: { name: string }) => q.name);
    expect(names).toContain('allowed.q');
    expect(names).not.toContain('other.q');
  });

  it('/healthz is always open; /readyz, /metrics and /docs are open by default', async () => {
    for (const url of ['/healthz', '/readyz', '/metrics', '/docs/', '/openapi.json']) {
      expect((await app.inject({ method: 'GET', url })).statusCode, url).toBe(200);
    }
  });

  it('with BATON_OPEN_ENDPOINTS=none, /readyz, /metrics and /docs need a key (any scope)', async () => {
    const closed = await createTestApp(database, { BATON_API_KEYS: KEYS, BATON_OPEN_ENDPOINTS: 'none' });
    try {
      expect((await closed.inject({ method: 'GET', url: '/healthz' })).statusCode).toBe(200);
      for (const url of ['/readyz', '/metrics', '/docs/', '/openapi.json']) {
        expect((await closed.inject({ method: 'GET', url })).statusCode, url).toBe(401);
        expect(
          (await closed.inject({ method: 'GET', url, headers: headers('producer') })).statusCode,
          url,
        ).toBe(200);
      }
    } finally {
      await closed.close();
    }
  });

  it('never logs a key or a lease token', async () => {
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk, _enc, done) {
        lines.push(String(chunk));
        done();
      },
    });
    const config = testConfig({ BATON_API_KEYS: KEYS, LOG_LEVEL: 'trace' });
    const logged = await buildApp({
      config,
      databaseUrl: database.url,
      logger: pino({ level: 'trace' }, sink),
    });
    await logged.ready();
    try {
      const h = headers('admin');
      await logged.inject({
        method: 'POST',
        url: '/v1/queues/logq/jobs',
        headers: h,
        payload: { payload: 1 },
      });
      const claimed = (
        await logged.inject({ method: 'POST', url: '/v1/queues/logq/claim', headers: h, payload: {} })
      ).json();
      const token = claimed.jobs[0].lease_token;
      await logged.inject({
        method: 'POST',
        url: `/v1/jobs/${claimed.jobs[0].id}/ack`,
        headers: h,
        payload: { lease_token: token },
      });
      await logged.inject({
        method: 'POST',
        url: '/v1/queues/logq/claim',
        headers: headers('wrong'),
        payload: {},
      });
      const all = lines.join('');
      expect(lines.length).toBeGreaterThan(3);
      expect(all).not.toContain(SECRETS.admin);
      expect(all).not.toContain('not-a-key');
      expect(all).not.toContain(token);
    } finally {
      await logged.close();
    }
  });
});

describe('safe defaults', () => {
  it('refuses to bind a non-loopback address with no keys, naming what to do', () => {
    expect(() => loadStartup({ HOST: '0.0.0.0' })).toThrow(
      /HOST=0\.0\.0\.0 would expose Baton without authentication/,
    );
    expect(loadStartup({ HOST: '0.0.0.0', BATON_ALLOW_UNAUTHENTICATED: 'true' }).config.host).toBe('0.0.0.0');
    expect(loadStartup({ HOST: '0.0.0.0', BATON_API_KEYS: KEYS }).apiKeys).toHaveLength(4);
    expect(loadStartup({}).config.host).toBe('127.0.0.1');
  });

  it.each([
    ['[{"name": "x"}]', /BATON_API_KEYS \[0\]\.sha256 must be the 64 hex digits/],
    ['{"name": "x"}', /BATON_API_KEYS must be a JSON array/],
    ['not json', /BATON_API_KEYS is not valid JSON/],
    [
      `[{"name": "x", "sha256": "${'a'.repeat(64)}", "scopes": ["root"]}]`,
      /\[0\]\.scopes must be a non-empty list/,
    ],
    [
      `[{"name": "x", "sha256": "${'a'.repeat(64)}", "scopes": ["admin"], "secret": "s"}]`,
      /\[0\]\.secret is not a known field/,
    ],
  ])('rejects BATON_API_KEYS=%s', (value, message) => {
    expect(() => loadStartup({ BATON_API_KEYS: value })).toThrow(message);
  });

  it('rejects an unreadable key file, naming it', () => {
    expect(() => loadStartup({ BATON_API_KEYS_FILE: '/nonexistent/keys.json' })).toThrow(
      /BATON_API_KEYS_FILE cannot be read/,
    );
  });
});
