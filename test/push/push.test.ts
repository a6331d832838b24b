import http from 'node:http';
import { Writable } from 'node:stream';
import pino from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/app.js';
import { deliver } from '../../src/push/deliver.js';
import { actionOf } from '../../src/push/outcome.js';
import { createTestApp, testConfig, useTestApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { api } from '../support/http.js';
import { apiKeyEntry, bearer } from '../support/keys.js';
import { json, startReceiver, verifySignature } from './receiver.js';

/**
 * Push queues end to end: a real HTTP receiver started here, Baton's dispatcher claiming under a
 * lease and POSTing each job, and the job's state read back through the API.
 */
const database = useTestDatabase();
const PUSH = { BATON_PUSH: 'true', BATON_PUSH_ALLOW: '*,127.0.0.1' };
// The leader runs here: it makes retried (scheduled) jobs ready again when they are due.
const app = useTestApp(database, { ...PUSH, BATON_MAINTENANCE: 'true', BATON_TICK_MS: '200' });

const receivers: { close: () => Promise<void> }[] = [];
afterAll(async () => {
  for (const r of receivers) await r.close();
});
async function receiver(...args: Parameters<typeof startReceiver>) {
  const r = await startReceiver(...args);
  receivers.push(r);
  return r;
}

async function until<T>(read: () => Promise<T>, ok: (v: T) => boolean, ms = 10_000): Promise<T> {
  const deadline = Date.now() + ms;
  while (true) {
    const v = await read();
    if (ok(v)) return v;
    if (Date.now() > deadline) throw new Error(`still not so after ${ms} ms: ${JSON.stringify(v)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const job = async (id: string) => (await api(app).get(id)).body;
const setPush = (queue: string, body: object) => api(app).call('PUT', `/v1/queues/${queue}/push`, body);
/** A retry a minute away: what a test reads after a failed delivery stays put. */
const slowRetries = (queue: string) =>
  api(app).call('PUT', `/v1/queues/${queue}`, { backoff: { base_ms: 60_000, jitter: false } });

describe('push queues', () => {
  it('POSTs each job signed, with its id, attempt and lease; a 200 with JSON acks it with that result', async () => {
    const r = await receiver((_, res) => json(res, 200, { sent: true }));
    const made = await setPush('push-ok', { url: r.url });
    expect(made.status).toBe(201);
    const secret = made.body.secret as string;
    expect(secret).toMatch(/^bps_/);
    const read = await api(app).call('GET', '/v1/queues/push-ok/push');
    expect(read.body).toMatchObject({ url: r.url, timeout_ms: 30_000, concurrency: 10 });
    expect(JSON.stringify(read.body)).not.toContain(secret);
    // Setting it again changes the endpoint and keeps the secret.
    const again = await setPush('push-ok', { url: r.url, timeout_ms: 5000 });
    expect([again.status, again.body.secret, again.body.timeout_ms]).toEqual([200, undefined, 5000]);

    const enq = await api(app).enqueue('push-ok', {
      payload: { to: 'ada@example.com' },
      traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',
    });
    const done = await until(
      () => job(enq.body.id),
      (j) => j.state === 'completed',
    );
    expect(done.result).toEqual({ sent: true });
    expect(r.received).toHaveLength(1);
    const [got] = r.received;
    expect(JSON.parse(got!.body)).toEqual({ to: 'ada@example.com' });
    expect(got!.headers).toMatchObject({
      'content-type': 'application/json',
      'baton-job-id': enq.body.id,
      'baton-queue': 'push-ok',
      'baton-attempt': '1',
      traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',
    });
    expect(got!.headers['baton-lease-token']).toBeTruthy();
    expect(Date.parse(String(got!.headers['baton-lease-expires-at']))).toBeGreaterThan(Date.now());
    expect(verifySignature(String(got!.headers['baton-signature']), got!.body, secret)).toBe(true);
    expect(verifySignature(String(got!.headers['baton-signature']), `${got!.body} `, secret)).toBe(false);
    expect(verifySignature(String(got!.headers['baton-signature']), got!.body, 'bps_wrong')).toBe(false);

    // The queue says it is a push queue; once push is off, its jobs wait for workers again.
    expect((await api(app).call('GET', '/v1/queues/push-ok')).body.push).toBe(true);
    const off = await api(app).call('DELETE', '/v1/queues/push-ok/push');
    expect([off.status, off.body]).toEqual([200, { queue: 'push-ok', push: false }]);
    expect((await api(app).call('GET', '/v1/queues/push-ok')).body.push).toBe(false);
    expect((await api(app).call('GET', '/v1/queues/push-ok/push')).status).toBe(404);
    const waits = await api(app).enqueue('push-ok', { payload: 'for a worker' });
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect((await job(waits.body.id)).state).toBe('ready');
    expect(r.received).toHaveLength(1);
  });

  it('each answer decides: 204 acks, 400 and 500 retry with the error, 410 and Baton-Dead: true go dead', async () => {
    const r = await receiver((got, res) => {
      const { answer } = JSON.parse(got.body) as { answer: number | 'dead-header' };
      if (answer === 'dead-header') {
        res.writeHead(422, { 'baton-dead': 'true' });
        res.end('bad input, for good');
      } else if (answer === 204) {
        res.writeHead(204);
        res.end();
      } else json(res, answer, { error: `answered ${answer}` });
    });
    await slowRetries('push-answers');
    await setPush('push-answers', { url: r.url });
    const ids: Record<string, string> = {};
    for (const answer of [204, 400, 500, 410, 'dead-header'] as const) {
      ids[answer] = (await api(app).enqueue('push-answers', { payload: { answer } })).body.id;
    }
    const settled = async (id: string) =>
      until(
        () => job(id),
        (j) => j.state !== 'ready' && j.state !== 'claimed',
      );
    expect(await settled(ids[204]!)).toMatchObject({ state: 'completed', result: null });
    for (const status of [400, 500]) {
      const j = await settled(ids[status]!);
      expect(j.state).toBe('scheduled');
      expect(j.attempts).toBe(1);
      expect(j.last_error.message).toBe(`push: HTTP ${status}`);
      expect(j.last_error.details.push).toMatchObject({ status, body: `{"error":"answered ${status}"}` });
    }
    expect(await settled(ids[410]!)).toMatchObject({ state: 'dead' });
    const dead = await settled(ids['dead-header']!);
    expect(dead.state).toBe('dead');
    expect(dead.last_error.details.push.body).toBe('bad input, for good');
  });

  it('a timeout and a closed port retry; a redirect is an answer, never followed', async () => {
    const target = await receiver((_, res) => json(res, 200, {}));
    const slow = await receiver(() => {}); // never answers
    for (const q of ['push-slow', 'push-gone', 'push-redirect']) await slowRetries(q);
    await setPush('push-slow', { url: slow.url, timeout_ms: 300 });
    const late = (await api(app).enqueue('push-slow', { payload: 1 })).body.id;
    const timedOut = await until(
      () => job(late),
      (j) => j.state === 'scheduled',
    );
    expect(timedOut.last_error.message).toBe('push: no answer within 300 ms');

    const gone = await receiver((_, res) => json(res, 200, {}));
    const goneUrl = gone.url;
    await gone.close();
    await setPush('push-gone', { url: goneUrl });
    const lost = (await api(app).enqueue('push-gone', { payload: 1 })).body.id;
    const refused = await until(
      () => job(lost),
      (j) => j.state === 'scheduled',
    );
    expect(refused.last_error.message).toMatch(/^push: connect ECONNREFUSED/);

    const redirecting = await receiver((_, res) => {
      res.writeHead(307, { location: target.url });
      res.end();
    });
    await setPush('push-redirect', { url: redirecting.url });
    const moved = (await api(app).enqueue('push-redirect', { payload: 1 })).body.id;
    const j = await until(
      () => job(moved),
      (x) => x.state === 'scheduled',
    );
    expect(j.last_error.message).toBe('push: HTTP 307');
    expect(target.received).toHaveLength(0);
  });

  it('a 202 leaves the lease with the endpoint, which acks through the API with the token it was given', async () => {
    const tokens: { id: string; token: string }[] = [];
    const r = await receiver((got, res) => {
      tokens.push({
        id: String(got.headers['baton-job-id']),
        token: String(got.headers['baton-lease-token']),
      });
      res.writeHead(202);
      res.end();
    });
    await setPush('push-long', { url: r.url });
    const id = (await api(app).enqueue('push-long', { payload: 'long' })).body.id;
    await until(
      async () => tokens.length,
      (n) => n === 1,
    );
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect((await job(id)).state).toBe('claimed');
    const renewed = await api(app).renew(id, { lease_token: tokens[0]!.token, progress: { half: true } });
    expect(renewed.status).toBe(200);
    const acked = await api(app).ack(id, { lease_token: tokens[0]!.token, result: { done: 1 } });
    expect(acked.status).toBe(200);
    expect(await job(id)).toMatchObject({ state: 'completed', result: { done: 1 } });
    expect(r.received).toHaveLength(1);
  });

  it('a rotation: both secrets sign during the overlap, then only the new one', async () => {
    const r = await receiver((_, res) => json(res, 200, {}));
    const first = (await setPush('push-rotate', { url: r.url })).body.secret as string;
    const rotated = await api(app).call('POST', '/v1/queues/push-rotate/push/rotate-secret', {
      overlap_ms: 60_000,
    });
    expect(rotated.status).toBe(200);
    const second = rotated.body.secret as string;
    expect(second).not.toBe(first);
    expect(Date.parse(rotated.body.previous_secret_until)).toBeGreaterThan(Date.now());
    const a = (await api(app).enqueue('push-rotate', { payload: 'a' })).body.id;
    await until(
      () => job(a),
      (j) => j.state === 'completed',
    );
    const during = r.received.at(-1)!;
    expect(verifySignature(String(during.headers['baton-signature']), during.body, first)).toBe(true);
    expect(verifySignature(String(during.headers['baton-signature']), during.body, second)).toBe(true);

    const third = (
      await api(app).call('POST', '/v1/queues/push-rotate/push/rotate-secret', { overlap_ms: 0 })
    ).body.secret as string;
    const b = (await api(app).enqueue('push-rotate', { payload: 'b' })).body.id;
    await until(
      () => job(b),
      (j) => j.state === 'completed',
    );
    const after = r.received.at(-1)!;
    expect(verifySignature(String(after.headers['baton-signature']), after.body, third)).toBe(true);
    expect(verifySignature(String(after.headers['baton-signature']), after.body, second)).toBe(false);
    expect(verifySignature(String(after.headers['baton-signature']), after.body, first)).toBe(false);
  });

  it('429 with Retry-After backs off and halves the concurrency; answers regrow it; metrics count it', async () => {
    let throttle = true;
    const r = await receiver(async (_, res) => {
      if (throttle) return json(res, 429, {}, { 'retry-after': '1' });
      await new Promise((resolve) => setTimeout(resolve, 20));
      json(res, 200, {});
    });
    await setPush('push-throttle', { url: r.url, concurrency: 8 });
    const ids = (
      await api(app).enqueueBatch(
        'push-throttle',
        Array.from({ length: 40 }, (_, i) => ({ payload: i })),
      )
    ).body.jobs.map((j: { id: string }) => j.id);
    const metric = async (name: string) => {
      const text = (await app.inject({ method: 'GET', url: '/metrics' })).body;
      const line = text.split('\n').find((l) => l.startsWith(`${name}{queue="push-throttle"`));
      return line ? Number(line.split(' ').pop()) : undefined;
    };
    await until(
      () => metric('baton_push_backoffs_total'),
      (n) => (n ?? 0) >= 1,
    );
    expect(await metric('baton_push_concurrency')).toBeLessThan(8);
    // A throttled job was given back: ready, its attempt not counted and no error recorded, while
    // the replica waits out the Retry-After (a second) before it delivers again. The backoff is
    // counted as the answer arrives, before the give-back commits: the job is read once it has left
    // its lease.
    const throttled = await until(
      () => job(ids[0]!),
      (j) => j.state !== 'claimed',
      2000,
    );
    expect(throttled).toMatchObject({ state: 'ready', attempts: 0, errors: [] });
    const paused = r.received.length;
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(r.received.length).toBe(paused);
    throttle = false;
    for (const id of ids)
      await until(
        () => job(id),
        (j) => j.state === 'completed',
        20_000,
      );
    await until(
      () => metric('baton_push_concurrency'),
      (n) => n === 8,
      20_000,
    ).catch(async () => {
      // Regrowing takes about one window of answers per slot: push more work through until it is back.
      const more = await api(app).enqueueBatch(
        'push-throttle',
        Array.from({ length: 200 }, (_, i) => ({ payload: i })),
      );
      for (const j of more.body.jobs)
        await until(
          () => job(j.id),
          (x) => x.state === 'completed',
          20_000,
        );
    });
    expect(await metric('baton_push_concurrency')).toBe(8);
    expect(r.maxInFlight).toBeLessThanOrEqual(8);
  });

  it('a receiver slower than the timeout narrows the window to one; once it answers in time, it grows back', async () => {
    let slow = true;
    const r = await receiver((_, res) => {
      if (!slow) json(res, 200, {});
      // Slow: never answers in time; the connection is left to the timeout.
    });
    await api(app).call('PUT', '/v1/queues/push-slow-window', {
      backoff: { base_ms: 100, max_ms: 200, jitter: false },
    });
    await setPush('push-slow-window', { url: r.url, concurrency: 4, timeout_ms: 200 });
    const metric = async (name: string) => {
      const text = (await app.inject({ method: 'GET', url: '/metrics' })).body;
      const line = text.split('\n').find((l) => l.startsWith(`${name}{queue="push-slow-window"`));
      return line ? Number(line.split(' ').pop()) : undefined;
    };
    const ids = (
      await api(app).enqueueBatch(
        'push-slow-window',
        Array.from({ length: 4 }, (_, i) => ({ payload: i })),
      )
    ).body.jobs.map((j: { id: string }) => j.id);
    await until(
      () => metric('baton_push_concurrency'),
      (n) => n === 1,
    );
    expect(await metric('baton_push_backoffs_total')).toBeGreaterThanOrEqual(2);
    expect(r.maxInFlight).toBeLessThanOrEqual(4);
    slow = false;
    for (const id of ids)
      await until(
        () => job(id),
        (j) => j.state === 'completed',
      );
    const more = await api(app).enqueueBatch(
      'push-slow-window',
      Array.from({ length: 20 }, (_, i) => ({ payload: i })),
    );
    for (const j of more.body.jobs)
      await until(
        () => job(j.id),
        (x) => x.state === 'completed',
      );
    expect(await metric('baton_push_concurrency')).toBe(4);
  });

  it("flow control holds for pushes: the queue's concurrency_limit caps deliveries in flight below the push concurrency", async () => {
    const r = await receiver(async (_, res) => {
      await new Promise((resolve) => setTimeout(resolve, 50));
      json(res, 200, {});
    });
    await api(app).call('PUT', '/v1/queues/push-limited', { concurrency_limit: 2 });
    await setPush('push-limited', { url: r.url, concurrency: 8 });
    const ids = (
      await api(app).enqueueBatch(
        'push-limited',
        Array.from({ length: 30 }, (_, i) => ({ payload: i })),
      )
    ).body.jobs.map((j: { id: string }) => j.id);
    for (const id of ids)
      await until(
        () => job(id),
        (j) => j.state === 'completed',
      );
    expect(r.maxInFlight).toBe(2);
  });

  it('an answer past the bound is cut, and the job is acked without a result', async () => {
    const r = await receiver((_, res) => json(res, 200, { big: 'x'.repeat(5000) }));
    const answer = await deliver({
      url: new URL(r.url),
      address: '127.0.0.1',
      family: 4,
      headers: { 'content-type': 'application/json' },
      body: '{}',
      timeoutMs: 5000,
      maxAnswerBytes: 1024,
      signal: new AbortController().signal,
      agent: new http.Agent(),
    });
    expect(answer).toMatchObject({ kind: 'answer', status: 200, cut: true });
    expect(answer.kind === 'answer' && answer.body.length).toBe(1024);
    expect(actionOf(answer)).toEqual({ kind: 'ack', outcome: 'acked' });
  });

  it("a push queue's secret reaches no log line and no metric", async () => {
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk, _enc, done) {
        lines.push(String(chunk));
        done();
      },
    });
    const logged = await buildApp({
      config: testConfig({ ...PUSH, LOG_LEVEL: 'trace' }),
      databaseUrl: database.url,
      logger: pino({ level: 'trace' }, sink),
    });
    await logged.ready();
    try {
      const r = await receiver((_, res) => json(res, 500, {}));
      const made = await logged.inject({
        method: 'PUT',
        url: '/v1/queues/push-logged/push',
        payload: { url: r.url },
      });
      const rotated = await logged.inject({
        method: 'POST',
        url: '/v1/queues/push-logged/push/rotate-secret',
        payload: {},
      });
      const secrets = [made.json().secret as string, rotated.json().secret as string];
      await logged.inject({ method: 'POST', url: '/v1/queues/push-logged/jobs', payload: { payload: 1 } });
      await until(
        async () => r.received.length,
        (n) => n >= 1,
      );
      await new Promise((resolve) => setTimeout(resolve, 200));
      const metrics = (await logged.inject({ method: 'GET', url: '/metrics' })).body;
      for (const secret of secrets) {
        expect(metrics).not.toContain(secret);
        expect(lines.join('')).not.toContain(secret);
      }
      expect(lines.length).toBeGreaterThan(0);
    } finally {
      await logged.close();
    }
  });

  it('refuses a URL that is private (unless allowed), carries credentials, or is not http', async () => {
    const strict = await createTestApp(database, { BATON_PUSH: 'false', BATON_PUSH_ALLOW: '*' });
    try {
      for (const [url, says] of [
        ['http://127.0.0.1:9/x', 'private or special address'],
        ['http://169.254.169.254/latest/meta-data', 'private or special address'],
        ['http://[::1]:9/x', 'private or special address'],
        // Documentation and shared (carrier-grade NAT) ranges, and IPv4 inside IPv6 (6to4 of 10.0.0.1, NAT64).
        ['http://192.0.2.10/x', 'private or special address'],
        ['http://198.51.100.7/x', 'private or special address'],
        ['http://203.0.113.99/x', 'private or special address'],
        ['http://100.100.100.200/latest/meta-data', 'private or special address'],
        ['http://[2002:a00:1::1]/x', 'private or special address'],
        ['http://[64:ff9b::a00:1]/x', 'private or special address'],
        ['http://[2001:db8::1]/x', 'private or special address'],
        ['http://user:pw@example.com/x', 'user name or password'],
        ['ftp://example.com/x', 'http or https'],
        ['not a url', 'absolute http or https URL'],
      ]) {
        const res = await strict.inject({
          method: 'PUT',
          url: '/v1/queues/push-refused/push',
          payload: { url },
        });
        expect(res.statusCode, url).toBe(400);
        expect(res.json().errors[0].field, url).toBe('url');
        expect(res.json().detail, url).toContain(says);
      }
    } finally {
      await strict.close();
    }
  });

  it("a queue-limited admin key sets push only on its own queues, and sees no other queue's endpoint", async () => {
    const r = await receiver((_, res) => json(res, 200, {}));
    await setPush('push-theirs', { url: r.url });
    const keyed = await createTestApp(database, {
      ...PUSH,
      BATON_PUSH: 'false',
      BATON_API_KEYS: JSON.stringify([apiKeyEntry('tenant', ['admin'], ['push-mine*'])]),
    });
    try {
      const as = (method: 'GET' | 'PUT' | 'DELETE', url: string, payload?: object) =>
        keyed.inject({ method, url, headers: bearer('tenant'), ...(payload ? { payload } : {}) });
      expect((await as('PUT', '/v1/queues/push-mine/push', { url: r.url })).statusCode).toBe(201);
      for (const res of [
        await as('PUT', '/v1/queues/push-theirs/push', { url: r.url }),
        await as('GET', '/v1/queues/push-theirs/push'),
        await as('DELETE', '/v1/queues/push-theirs/push'),
      ]) {
        expect(res.statusCode).toBe(403);
      }
      expect((await api(app).call('GET', '/v1/queues/push-theirs/push')).body.url).toBe(r.url);
    } finally {
      await keyed.close();
    }
  });
});
