import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BatonApp } from '../../src/app.js';
import { MAX_AWAIT_IDS, MAX_AWAIT_MS } from '../../src/jobs/limits.js';
import { RearmDuty } from '../../src/maintenance/rearm.js';
import { JOBS_CHANNEL, type JobsNotice } from '../../src/wake/channel.js';
import { createTestApp, listen } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { api, enqueueAndClaim } from '../support/http.js';
import { apiKeyEntry, bearer } from '../support/keys.js';
import { until } from '../support/until.js';

/**
 * Awaiting a job's end: GET /v1/jobs/{id}?wait_ms and POST /v1/jobs/await. Both replicas poll only
 * every 30 s, so an answer within a second of the ack can only come from a wake-up: in this process
 * (the service) or from the other replica (a notice sent because this one announced the wait).
 */
const database = useTestDatabase();
const SLOW_POLL = { BATON_POLL_INTERVAL_MS: '30000' };
let app: BatonApp;
let other: BatonApp;

beforeAll(async () => {
  app = await createTestApp(database, SLOW_POLL);
  other = await createTestApp(database, SLOW_POLL);
  await until(() => app.wake.listener.connected && other.wake.listener.connected);
});
afterAll(async () => {
  await Promise.all([app?.close(), other?.close()]);
});

const get = (on: BatonApp, id: string, waitMs: number) =>
  api(on).call('GET', `/v1/jobs/${id}?wait_ms=${waitMs}`);
const awaitMany = (on: BatonApp, body: object) => api(on).call('POST', '/v1/jobs/await', body);

/** Resolves once `n` requests of `on` wait (registered and told the other replicas). */
const waiting = (on: BatonApp, n = 1) => until(() => on.wake.finishWaits.waiting() >= n, 5000);

describe('GET /v1/jobs/{id}?wait_ms', () => {
  it('answers a finished job at once, with its result', async () => {
    const job = await enqueueAndClaim(app, 'aw-done');
    await api(app).ack(job.id, { lease_token: job.lease_token, result: { sum: 3 } });
    const started = Date.now();
    const res = await get(app, job.id, 10_000);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ id: job.id, state: 'completed', result: { sum: 3 } });
    expect(Date.now() - started).toBeLessThan(1000);
  });

  it('waits for the ack on the same replica and answers the completed job', async () => {
    const job = await enqueueAndClaim(app, 'aw-local');
    const answer = get(app, job.id, 20_000);
    await waiting(app);
    await api(app).ack(job.id, { lease_token: job.lease_token, result: 'ok' });
    const ackedAt = Date.now();
    const res = await answer;
    expect(res.body).toMatchObject({ state: 'completed', result: 'ok' });
    expect(Date.now() - ackedAt).toBeLessThan(1000);
    expect(app.wake.finishWaits.waiting()).toBe(0);
  });

  it('waits for an ack on another replica, woken by its notice', async () => {
    const job = await enqueueAndClaim(app, 'aw-remote');
    const answer = get(other, job.id, 20_000);
    await waiting(other);
    // The announcement reaches the acking replica before it acks (the notice is sent before the
    // waiter's second read; the listener hears it a moment later).
    await until(() =>
      (app.wake.notifier as unknown as { awaitedElsewhere: Map<string, number> }).awaitedElsewhere.has(
        job.id,
      ),
    );
    await api(app).ack(job.id, { lease_token: job.lease_token, result: 7 });
    const ackedAt = Date.now();
    const res = await answer;
    expect(res.body).toMatchObject({ id: job.id, state: 'completed', result: 7 });
    expect(Date.now() - ackedAt).toBeLessThan(1000);
  });

  it('ends with a nack to dead, and with a cancel', async () => {
    const dead = await enqueueAndClaim(app, 'aw-dead');
    const deadAnswer = get(other, dead.id, 20_000);
    const cancelled = await enqueueAndClaim(app, 'aw-cancel');
    const cancelAnswer = get(app, cancelled.id, 20_000);
    await waiting(other);
    await waiting(app);
    await api(app).nack(dead.id, { lease_token: dead.lease_token, dead: true, error: { message: 'no' } });
    await api(other).cancel(cancelled.id);
    const t = Date.now();
    expect((await deadAnswer).body).toMatchObject({ state: 'dead', dead_reason: 'nacked_dead' });
    expect((await cancelAnswer).body).toMatchObject({ state: 'cancelled' });
    expect(Date.now() - t).toBeLessThan(1000);
  });

  it('ends with a purge of its queue, and with a forced delete of it', async () => {
    const purged = (await api(app).enqueue('aw-purge', { payload: 1 })).body;
    const deleted = (await api(app).enqueue('aw-delete', { payload: 1 })).body;
    const purgedAnswer = get(other, purged.id, 20_000);
    const deletedAnswer = get(other, deleted.id, 20_000);
    await waiting(other, 2);
    await until(
      () =>
        (app.wake.notifier as unknown as { awaitedElsewhere: Map<string, number> }).awaitedElsewhere.size >=
        2,
    );
    expect((await api(app).call('POST', '/v1/queues/aw-purge/purge')).status).toBe(200);
    expect((await api(app).call('DELETE', '/v1/queues/aw-delete?force=true')).status).toBe(200);
    const t = Date.now();
    expect((await purgedAnswer).body).toMatchObject({ state: 'cancelled' });
    expect((await deletedAnswer).body).toMatchObject({ state: 'cancelled' });
    expect(Date.now() - t).toBeLessThan(1000);
  });

  it("ends when the leader's re-arm buries the job on its last attempt", async () => {
    const job = await enqueueAndClaim(app, 'aw-rearm', { payload: 1, max_attempts: 1 }, { lease_ms: 1000 });
    const answer = get(other, job.id, 20_000);
    await waiting(other);
    await new Promise((r) => setTimeout(r, 1100));
    const duty = new RearmDuty(
      app.db,
      app.metrics,
      () => {},
      5000,
      100,
      (ids) => app.wake.notifier.jobsFinished(ids.map((id) => ({ id }))),
    );
    await until(async () => (await duty.runOnce()).deadIds.includes(job.id));
    const t = Date.now();
    expect((await answer).body).toMatchObject({ state: 'dead', dead_reason: 'lease_expired' });
    expect(Date.now() - t).toBeLessThan(1000);
  });

  it('answers the live job when the wait runs out', async () => {
    const job = await enqueueAndClaim(app, 'aw-timeout');
    const started = Date.now();
    const res = await get(app, job.id, 300);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ id: job.id, state: 'claimed', finished_at: null });
    expect(Date.now() - started).toBeGreaterThanOrEqual(290);
    expect(app.wake.finishWaits.waiting()).toBe(0);
  });

  it(`refuses wait_ms beyond ${MAX_AWAIT_MS} and unknown parameters, naming them; 404 for no job`, async () => {
    const job = await enqueueAndClaim(app, 'aw-bad');
    const tooLong = await get(app, job.id, MAX_AWAIT_MS + 1);
    expect(tooLong.status).toBe(400);
    expect(tooLong.body.detail).toContain('wait_ms');
    const negative = await get(app, job.id, -1);
    expect(negative.status).toBe(400);
    const unknown = await api(app).call('GET', `/v1/jobs/${job.id}?wait=5`);
    expect(unknown.status).toBe(400);
    expect(unknown.body.detail).toContain('wait');
    const missing = await get(app, '987654321', 5000);
    expect(missing.status).toBe(404);
  });

  it('ends at once when the client goes away', async () => {
    const job = await enqueueAndClaim(app, 'aw-gone');
    const url = await listen(other);
    const abort = new AbortController();
    const request = fetch(`${url}/v1/jobs/${job.id}?wait_ms=20000`, { signal: abort.signal }).catch(
      (err) => err,
    );
    await waiting(other);
    abort.abort();
    await request;
    await until(() => other.wake.finishWaits.waiting() === 0, 2000);
  });

  it('may wait longer than BATON_REQUEST_TIMEOUT_MS (which counts only the request coming in)', async () => {
    const strict = await createTestApp(database, { ...SLOW_POLL, BATON_REQUEST_TIMEOUT_MS: '1000' });
    try {
      const url = await listen(strict);
      const job = await enqueueAndClaim(app, 'aw-request-timeout');
      const started = Date.now();
      const res = await fetch(`${url}/v1/jobs/${job.id}?wait_ms=2500`);
      expect(res.status).toBe(200);
      expect(((await res.json()) as { state: string }).state).toBe('claimed');
      expect(Date.now() - started).toBeGreaterThanOrEqual(2400);
    } finally {
      await strict.close();
    }
  });

  it('ends at once on shutdown, answering the job as it is', async () => {
    const closing = await createTestApp(database, SLOW_POLL);
    const job = await enqueueAndClaim(app, 'aw-close');
    const answer = get(closing, job.id, 20_000);
    await waiting(closing);
    const started = Date.now();
    await closing.close();
    const res = await answer;
    expect(res.body).toMatchObject({ id: job.id, state: 'claimed' });
    expect(Date.now() - started).toBeLessThan(2000);
  });

  it('with polling alone (no notifications), still finds the end', async () => {
    const polling = await createTestApp(database, { BATON_POLL_INTERVAL_MS: '200' });
    try {
      await polling.wake.listener.stop();
      const job = await enqueueAndClaim(app, 'aw-poll');
      const answer = get(polling, job.id, 10_000);
      await waiting(polling);
      await api(app).ack(job.id, { lease_token: job.lease_token });
      const t = Date.now();
      expect((await answer).body.state).toBe('completed');
      expect(Date.now() - t).toBeLessThan(1500);
    } finally {
      await polling.close();
    }
  });
});

describe('notifications cost only jobs someone awaits', () => {
  let listener: pg.Client;
  const notices: JobsNotice[] = [];
  beforeAll(async () => {
    listener = new pg.Client({ connectionString: database.url });
    await listener.connect();
    listener.on('notification', (msg) => notices.push(JSON.parse(msg.payload!)));
    await listener.query(`LISTEN ${JOBS_CHANNEL}`);
  });
  afterAll(() => listener.end());

  it('an ack of a job nobody awaits sends nothing; an awaited one sends one announcement and one end', async () => {
    const plain = await enqueueAndClaim(app, 'aw-cost');
    await app.wake.notifier.flush();
    await new Promise((r) => setTimeout(r, 100));
    notices.length = 0;
    await api(app).ack(plain.id, { lease_token: plain.lease_token });
    await app.wake.notifier.flush();
    await new Promise((r) => setTimeout(r, 200));
    expect(notices).toEqual([]);

    const awaited = await enqueueAndClaim(app, 'aw-cost');
    notices.length = 0;
    const answer = get(other, awaited.id, 20_000);
    await waiting(other);
    await until(() => notices.some((n) => n.a?.[awaited.id] !== undefined));
    await api(app).ack(awaited.id, { lease_token: awaited.lease_token });
    expect((await answer).body.state).toBe('completed');
    await until(() => notices.some((n) => n.f?.includes(awaited.id)));
    const mentions = notices.filter((n) => n.a?.[awaited.id] !== undefined || n.f?.includes(awaited.id));
    expect(mentions).toHaveLength(2);
  });
});

describe('POST /v1/jobs/await', () => {
  it('answers when every job has finished, in request order, with the ids of none', async () => {
    const a = await enqueueAndClaim(app, 'aw-batch');
    const b = await enqueueAndClaim(app, 'aw-batch');
    const c = await enqueueAndClaim(app, 'aw-batch');
    await api(app).ack(a.id, { lease_token: a.lease_token, result: 'a' });
    const answer = awaitMany(other, { ids: [c.id, '987654320', a.id, b.id], wait_ms: 20_000 });
    await waiting(other);
    await api(app).ack(b.id, { lease_token: b.lease_token, result: 'b' });
    await new Promise((r) => setTimeout(r, 150));
    // Still waiting: c has not finished.
    expect(other.wake.finishWaits.waiting()).toBe(1);
    await api(app).ack(c.id, { lease_token: c.lease_token, result: 'c' });
    const t = Date.now();
    const res = await answer;
    expect(Date.now() - t).toBeLessThan(1000);
    expect(res.status).toBe(200);
    expect(res.body.jobs.map((j: { id: string; result: string }) => [j.id, j.result])).toEqual([
      [c.id, 'c'],
      [a.id, 'a'],
      [b.id, 'b'],
    ]);
    expect(res.body).toMatchObject({ not_found: ['987654320'], finished: 3, unfinished: 0 });
  });

  it('answers what it has when the wait runs out', async () => {
    const a = await enqueueAndClaim(app, 'aw-batch-timeout');
    const b = await enqueueAndClaim(app, 'aw-batch-timeout');
    await api(app).ack(a.id, { lease_token: a.lease_token });
    const res = await awaitMany(app, { ids: [a.id, b.id], wait_ms: 200 });
    expect(res.body).toMatchObject({ finished: 1, unfinished: 1, not_found: [] });
    expect(res.body.jobs.map((j: { state: string }) => j.state)).toEqual(['completed', 'claimed']);
  });

  it('refuses a repeated id, too many ids and too long a wait, naming the field', async () => {
    const repeated = await awaitMany(app, { ids: ['1', '2', '1'] });
    expect(repeated.status).toBe(400);
    expect(repeated.body.detail).toContain('ids[2]');
    const many = await awaitMany(app, {
      ids: Array.from({ length: MAX_AWAIT_IDS + 1 }, (_, i) => String(i + 1)),
    });
    expect(many.status).toBe(400);
    expect(many.body.detail).toContain('ids');
    const long = await awaitMany(app, { ids: ['1'], wait_ms: MAX_AWAIT_MS + 1 });
    expect(long.status).toBe(400);
    expect(long.body.detail).toContain('wait_ms');
    const none = await awaitMany(app, { ids: [] });
    expect(none.status).toBe(400);
  });
});

describe('tenants', () => {
  let keyed: BatonApp;
  beforeAll(async () => {
    keyed = await createTestApp(database, {
      ...SLOW_POLL,
      BATON_API_KEYS: JSON.stringify([
        apiKeyEntry('admin', ['admin', 'producer', 'consumer']),
        apiKeyEntry('tenant-a', ['producer', 'consumer'], ['aw-tenant-a']),
      ]),
    });
  });
  afterAll(() => keyed?.close());

  it("a queue-limited key cannot await another tenant's job: 404, or not_found in a batch", async () => {
    const mine = await enqueueAndClaim(app, 'aw-tenant-a');
    const theirs = await enqueueAndClaim(app, 'aw-tenant-b');
    const read = (id: string) =>
      keyed.inject({ method: 'GET', url: `/v1/jobs/${id}?wait_ms=5000`, headers: bearer('tenant-a') });
    const started = Date.now();
    const refused = await read(theirs.id);
    expect(refused.statusCode).toBe(404);
    expect(refused.json()).toMatchObject({ code: 'not_found', detail: `job ${theirs.id} does not exist` });
    expect(Date.now() - started).toBeLessThan(1000);

    const batch = keyed.inject({
      method: 'POST',
      url: '/v1/jobs/await',
      headers: bearer('tenant-a'),
      payload: { ids: [theirs.id, mine.id], wait_ms: 20_000 },
    });
    await waiting(keyed);
    await api(app).ack(theirs.id, { lease_token: theirs.lease_token });
    await api(app).ack(mine.id, { lease_token: mine.lease_token });
    const res = (await batch).json();
    expect(res).toMatchObject({ not_found: [theirs.id], finished: 1, unfinished: 0 });
    expect(res.jobs.map((j: { id: string }) => j.id)).toEqual([mine.id]);
  });
});
