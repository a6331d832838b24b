import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BatonApp } from '../../src/app.js';
import { decodeCursor } from '../../src/http/cursor.js';
import { createTestApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { apiKeyEntry, bearer } from '../support/keys.js';

/**
 * A queue-scoped key is a tenant boundary: whatever it sends, it cannot act on, or learn about,
 * another tenant's queues and jobs. Tenant A holds keys limited to `a.*`; tenant 2 owns
 * `secret.tenant2`.
 */
const database = useTestDatabase();

const KEYS = JSON.stringify([
  apiKeyEntry('root', ['admin']),
  apiKeyEntry('a-admin', ['admin'], ['a.*']),
  apiKeyEntry('a-worker', ['consumer', 'producer'], ['a.*']),
]);

describe('tenant isolation', () => {
  let app: BatonApp;
  let secret: { id: string; lease_token: string };
  let mine: { id: string; lease_token: string };

  beforeAll(async () => {
    app = await createTestApp(database, { BATON_API_KEYS: KEYS, BATON_OPEN_ENDPOINTS: 'none' });
    for (const queue of ['secret.tenant2', 'a.one']) {
      await app.inject({
        method: 'POST',
        url: `/v1/queues/${queue}/jobs/batch`,
        headers: bearer('root'),
        payload: { jobs: [{ payload: 1 }, { payload: 2 }] },
      });
    }
    secret = (
      await app.inject({
        method: 'POST',
        url: '/v1/queues/secret.tenant2/claim',
        headers: bearer('root'),
        payload: {},
      })
    ).json().jobs[0];
    mine = (
      await app.inject({
        method: 'POST',
        url: '/v1/queues/a.one/claim',
        headers: bearer('a-worker'),
        payload: {},
      })
    ).json().jobs[0];
  });
  afterAll(() => app.close());

  const post = (url: string, who: string, payload?: object) =>
    app.inject({ method: 'POST', url, headers: bearer(who), ...(payload ? { payload } : {}) });

  it('a zero-padded id is refused everywhere; the other tenant’s job is untouched', async () => {
    const padded = secret.id.padStart(19, '0');
    const attempts = [
      post(`/v1/jobs/${padded}/cancel`, 'a-admin'),
      post(`/v1/jobs/${padded}/renew`, 'a-worker', { lease_token: secret.lease_token }),
      post(`/v1/jobs/${padded}/ack`, 'a-worker', { lease_token: secret.lease_token }),
      post(`/v1/jobs/${padded}/nack`, 'a-worker', { lease_token: secret.lease_token }),
      post('/v1/jobs/ack', 'a-worker', { acks: [{ id: padded, lease_token: secret.lease_token }] }),
      post('/v1/jobs/renew', 'a-worker', { renewals: [{ id: padded, lease_token: secret.lease_token }] }),
      app.inject({ method: 'GET', url: `/v1/jobs/${padded}`, headers: bearer('a-worker') }),
    ];
    for (const res of await Promise.all(attempts)) {
      expect(res.statusCode, res.body).toBe(400);
      expect(res.json().detail).toMatch(/job id/);
    }
    const still = await app.inject({ method: 'GET', url: `/v1/jobs/${secret.id}`, headers: bearer('root') });
    expect(still.json().state).toBe('claimed');
  });

  it('a job of another tenant is indistinguishable from a job that does not exist', async () => {
    const missing = '999999999999';
    for (const [method, path, who, body] of [
      ['GET', '', 'a-worker', undefined],
      ['POST', '/cancel', 'a-admin', undefined],
      ['POST', '/ack', 'a-worker', { lease_token: secret.lease_token }],
      ['POST', '/renew', 'a-worker', { lease_token: secret.lease_token }],
      ['POST', '/nack', 'a-worker', { lease_token: secret.lease_token }],
    ] as const) {
      const theirs = await app.inject({
        method,
        url: `/v1/jobs/${secret.id}${path}`,
        headers: bearer(who),
        ...(body ? { payload: body } : {}),
      });
      const nothing = await app.inject({
        method,
        url: `/v1/jobs/${missing}${path}`,
        headers: bearer(who),
        ...(body ? { payload: body } : {}),
      });
      expect(theirs.statusCode, path).toBe(404);
      expect(nothing.statusCode, path).toBe(404);
      expect(theirs.json().detail.replace(secret.id, 'N')).toBe(nothing.json().detail.replace(missing, 'N'));
      expect(theirs.body).not.toContain('secret');
    }
    // A batch item of another tenant is `not_found` and is not written; the key's own item is.
    const batch = await post('/v1/jobs/ack', 'a-worker', {
      acks: [
        { id: secret.id, lease_token: secret.lease_token },
        { id: mine.id, lease_token: mine.lease_token },
      ],
    });
    expect(batch.json().results).toEqual([
      { id: secret.id, outcome: 'not_found' },
      { id: mine.id, outcome: 'acked' },
    ]);
    const still = await app.inject({ method: 'GET', url: `/v1/jobs/${secret.id}`, headers: bearer('root') });
    expect(still.json().state).toBe('claimed');
  });

  it('repeated ids, however written, are one job: "1" and "01" cannot both pass', async () => {
    const res = await post('/v1/jobs/ack', 'a-worker', {
      acks: [
        { id: mine.id, lease_token: mine.lease_token },
        { id: `0${mine.id}`, lease_token: mine.lease_token },
      ],
    });
    expect(res.statusCode).toBe(400);
  });

  it('pages of queues come from the queues the key may see, and so do their cursors', async () => {
    for (const q of ['a.two', 'a.three', 'b.x', 'c.y', 'secret.z']) {
      await post(`/v1/queues/${q}/jobs`, 'root', { payload: 1 });
    }
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const page: { queues: { name: string }[]; next_cursor: string | null } = (
        await app.inject({
          method: 'GET',
          url: `/v1/queues?limit=1${cursor ? `&cursor=${cursor}` : ''}`,
          headers: bearer('a-worker'),
        })
      ).json();
      expect(page.queues.length).toBeLessThanOrEqual(1);
      seen.push(...page.queues.map((q) => q.name));
      cursor = page.next_cursor;
      if (cursor) expect(decodeCursor(cursor)?.[0]).toMatch(/^a\./);
    } while (cursor);
    expect(seen).toEqual(['a.one', 'a.three', 'a.two']);
  });

  it('protected operations endpoints answer 401 through every spelling of their URL', async () => {
    for (const url of [
      '/metrics',
      '/metrics/',
      '/%6detrics',
      '/metrics?x=1',
      '/readyz/',
      '/openapi.json/',
      '/docs/json',
      '/docs/',
      '/docs/static/index.html',
    ]) {
      const res = await app.inject({ method: 'GET', url });
      expect(res.statusCode, url).toBe(401);
    }
    expect((await app.inject({ method: 'GET', url: '/healthz/' })).statusCode).toBe(200);
  });

  it('an absolute-form request target is the same route with the same rule', async () => {
    const base = await app.listen({ port: 0, host: '127.0.0.1' });
    const { port } = new URL(base);
    const net = await import('node:net');
    const answer = await new Promise<string>((resolve, reject) => {
      const socket = net.connect(Number(port), '127.0.0.1', () => {
        socket.write(`GET http://127.0.0.1:${port}/metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
      });
      let text = '';
      socket.on('data', (c) => {
        text += c;
      });
      socket.on('end', () => resolve(text));
      socket.on('error', reject);
    });
    expect(answer).toMatch(/^HTTP\/1\.1 (401|404)/);
    expect(answer).not.toContain('baton_');
  });

  it('/metrics reports every queue, so a key limited to some queues may not read it', async () => {
    const limited = await app.inject({ method: 'GET', url: '/metrics', headers: bearer('a-worker') });
    expect(limited.statusCode).toBe(403);
    const root = await app.inject({ method: 'GET', url: '/metrics', headers: bearer('root') });
    expect(root.statusCode).toBe(200);
  });
});
