import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BatonApp } from '../../src/app.js';
import { createTestApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { api, type Reply } from '../support/http.js';
import { apiKeyEntry, bearer } from '../support/keys.js';
import { until } from '../support/until.js';

/**
 * What awaiting jobs costs the database and whom it can hurt (issue 39, findings 2 and 3): a replica
 * reads what it awaits in one statement per poll interval however many requests wait; a waiter reads
 * its rows once, when its answer is due, within a byte budget; requests awaiting jobs are capped per
 * key and per replica, and a tenant holding its cap leaves another tenant's requests answering.
 */
const database = useTestDatabase();

/** Every statement an app sends on its request pool from now on: its text and parameters. */
function recordStatements(app: BatonApp) {
  const seen: { sql: string; params: unknown[] }[] = [];
  const wrapped = new WeakSet<object>();
  const onAcquire = (client: pg.PoolClient) => {
    if (wrapped.has(client)) return;
    wrapped.add(client);
    const query = client.query.bind(client) as (...args: unknown[]) => unknown;
    (client as { query: unknown }).query = (...args: unknown[]) => {
      const [text, params] = args;
      if (typeof text === 'string') seen.push({ sql: text, params: Array.isArray(params) ? params : [] });
      return query(...args);
    };
  };
  app.dbPool.on('acquire', onAcquire);
  return { seen, stop: () => app.dbPool.off('acquire', onAcquire) };
}

/** Does a statement name any of these job ids (among its parameters, or in an array of them)? */
const names = (statement: { params: unknown[] }, ids: ReadonlySet<string>) =>
  statement.params.some((p) => (Array.isArray(p) ? p.some((v) => ids.has(String(v))) : ids.has(String(p))));

describe('one poll per replica', () => {
  const POLL_MS = 200;
  let app: BatonApp;
  beforeAll(async () => {
    app = await createTestApp(database, { BATON_POLL_INTERVAL_MS: String(POLL_MS) });
  });
  afterAll(() => app?.close());

  it('300 requests awaiting 300 jobs: the jobs are read once per poll interval, not 300 times', async () => {
    const created = await api(app).enqueueBatch(
      'cost-many',
      Array.from({ length: 300 }, (_, i) => ({ payload: { i } })),
    );
    const ids: string[] = created.body.jobs.map((j: { id: string }) => j.id);
    const awaited = new Set(ids);
    // Fifty at a time, as a client ramping up would: a burst of 300 first reads at once would meet
    // load shedding (the pool's queue), which is not what this test is about.
    const answers: Promise<Reply<{ state: string }>>[] = [];
    for (let i = 0; i < ids.length; i += 50) {
      for (const id of ids.slice(i, i + 50))
        answers.push(api(app).call('GET', `/v1/jobs/${id}?wait_ms=30000`));
      await until(() => app.wake.finishWaits.waiting() === i + 50);
    }
    // Let the registrations' own checks (one statement per few ms of registrations) go by.
    await new Promise((r) => setTimeout(r, 3 * POLL_MS));

    const recording = recordStatements(app);
    const started = Date.now();
    await new Promise((r) => setTimeout(r, 10 * POLL_MS));
    const elapsed = Date.now() - started;
    recording.stop();
    const reads = recording.seen.filter((s) => names(s, awaited));
    // One statement per interval elapsed (a timer may fire once more than the count of whole
    // intervals); polling per waiter would be 300 per interval.
    expect(reads.length).toBeGreaterThan(0);
    expect(reads.length).toBeLessThanOrEqual(Math.ceil(elapsed / POLL_MS) + 1);
    // Each is the one poll, naming every awaited job, and reading ids and queues only.
    for (const read of reads) {
      expect(read.sql).not.toContain('payload');
      expect((read.params.find(Array.isArray) as unknown[]).length).toBe(300);
    }

    // They all finish: every request is answered with its job, completed.
    const claimed = await api(app).claim('cost-many', { max_jobs: 300 });
    const acks = claimed.body.jobs.map((j: { id: string; lease_token: string }) => ({
      id: j.id,
      lease_token: j.lease_token,
    }));
    expect((await api(app).ackBatch(acks)).status).toBe(200);
    const states = (await Promise.all(answers)).map((res) => res.body.state);
    expect(states).toEqual(ids.map(() => 'completed'));
    expect(app.wake.finishWaits.waiting()).toBe(0);
    expect(app.wake.awaitSlots.held()).toBe(0);
  });

  it('50 requests awaiting the same 100 jobs, acked one by one: the rows are read whole once per request', async () => {
    const created = await api(app).enqueueBatch(
      'cost-shared',
      Array.from({ length: 100 }, (_, i) => ({ payload: { i } })),
    );
    const ids: string[] = created.body.jobs.map((j: { id: string }) => j.id);
    const awaited = new Set(ids);
    const recording = recordStatements(app);
    const answers = Array.from({ length: 50 }, () =>
      api(app).call('POST', '/v1/jobs/await', { ids, wait_ms: 30_000 }),
    );
    await until(() => app.wake.finishWaits.waiting() === 50);
    const claimed = await api(app).claim('cost-shared', { max_jobs: 100 });
    for (const job of claimed.body.jobs) {
      expect((await api(app).ack(job.id, { lease_token: job.lease_token, result: job.id })).status).toBe(200);
    }
    const bodies = (await Promise.all(answers)).map((res) => res.body);
    recording.stop();
    for (const body of bodies) expect(body).toMatchObject({ finished: 100, unfinished: 0, omitted: [] });
    // A whole-row read (the read's select list names the payload column of the live table).
    const wholeReads = recording.seen.filter((s) => names(s, awaited) && s.sql.includes('j.payload, j.meta'));
    expect(wholeReads.length).toBe(50);
  });
});

describe('caps on waiters', () => {
  let app: BatonApp;
  beforeAll(async () => {
    app = await createTestApp(database, {
      BATON_POLL_INTERVAL_MS: '30000',
      BATON_AWAIT_MAX_WAITERS_PER_KEY: '5',
      BATON_AWAIT_MAX_WAITERS: '8',
      BATON_AWAIT_MAX_JOBS_PER_KEY: '50',
      BATON_API_KEYS: JSON.stringify([
        apiKeyEntry('hostile', ['producer', 'consumer'], ['cap-hostile']),
        apiKeyEntry('honest', ['producer', 'consumer'], ['cap-honest']),
        apiKeyEntry('admin', ['admin']),
      ]),
    });
  });
  afterAll(() => app?.close());

  const as = (key: string, method: 'GET' | 'POST', url: string, payload?: object) =>
    app.inject({ method, url, headers: bearer(key), ...(payload ? { payload } : {}) });
  const enqueue = async (key: string, queue: string, n: number): Promise<string[]> => {
    const res = await as(key, 'POST', `/v1/queues/${queue}/jobs/batch`, {
      jobs: Array.from({ length: n }, () => ({ payload: {} })),
    });
    return res.json().jobs.map((j: { id: string }) => j.id);
  };

  it('a key past its cap is refused with 429 and Retry-After; another tenant keeps working beside it', async () => {
    const hostileIds = await enqueue('hostile', 'cap-hostile', 60);
    const held = hostileIds.slice(0, 5).map((id) => as('hostile', 'GET', `/v1/jobs/${id}?wait_ms=30000`));
    await until(() => app.wake.finishWaits.waiting() === 5);

    const refused = await as('hostile', 'GET', `/v1/jobs/${hostileIds[5]}?wait_ms=30000`);
    expect(refused.statusCode).toBe(429);
    expect(refused.headers['retry-after']).toBe('1');
    expect(refused.headers['content-type']).toContain('application/problem+json');
    expect(refused.json()).toMatchObject({ code: 'too_many_waiters', status: 429 });
    expect(refused.json().detail).toContain('BATON_AWAIT_MAX_WAITERS_PER_KEY');
    const refusedBatch = await as('hostile', 'POST', '/v1/jobs/await', {
      ids: [hostileIds[6]],
      wait_ms: 1000,
    });
    expect(refusedBatch.statusCode).toBe(429);
    // A read without wait_ms is never refused.
    expect((await as('hostile', 'GET', `/v1/jobs/${hostileIds[5]}`)).statusCode).toBe(200);

    // The honest tenant: enqueue, claim, ack, read, and await its own jobs, all answered 2xx.
    const honest: number[] = [];
    for (let round = 0; round < 3; round++) {
      const [id] = await enqueue('honest', 'cap-honest', 1);
      const waiting = as('honest', 'GET', `/v1/jobs/${id}?wait_ms=30000`);
      await until(() => app.wake.finishWaits.waiting() === 6);
      const claim = await as('honest', 'POST', '/v1/queues/cap-honest/claim', { max_jobs: 1 });
      honest.push(claim.statusCode);
      const job = claim.json().jobs[0];
      const ack = await as('honest', 'POST', `/v1/jobs/${job.id}/ack`, {
        lease_token: job.lease_token,
        result: round,
      });
      honest.push(ack.statusCode);
      const answer = await waiting;
      honest.push(answer.statusCode);
      expect(answer.json()).toMatchObject({ id, state: 'completed', result: round });
      honest.push((await as('honest', 'GET', `/v1/jobs/${id}`)).statusCode);
    }
    expect(honest.every((status) => status >= 200 && status < 300)).toBe(true);

    // The replica's cap: 5 of the hostile key's and 3 of the honest one's fill it.
    const honestIds = await enqueue('honest', 'cap-honest', 4);
    const honestHeld = honestIds.slice(0, 3).map((id) => as('honest', 'GET', `/v1/jobs/${id}?wait_ms=30000`));
    await until(() => app.wake.finishWaits.waiting() === 8);
    const full = await as('honest', 'GET', `/v1/jobs/${honestIds[3]}?wait_ms=30000`);
    expect(full.statusCode).toBe(429);
    expect(full.json().detail).toContain('BATON_AWAIT_MAX_WAITERS)');

    // Every held request is answered once its job ends, and gives its slot back.
    for (const queue of ['cap-hostile', 'cap-honest']) {
      expect((await as('admin', 'POST', `/v1/queues/${queue}/purge`)).statusCode).toBe(200);
    }
    for (const res of await Promise.all([...held, ...honestHeld])) {
      expect(res.statusCode).toBe(200);
      expect(res.json().state).toBe('cancelled');
    }
    expect(app.wake.awaitSlots.held()).toBe(0);
  });

  it('counts the jobs a key awaits: a batch past BATON_AWAIT_MAX_JOBS_PER_KEY is 429', async () => {
    const ids = await enqueue('hostile', 'cap-hostile', 51);
    const res = await as('hostile', 'POST', '/v1/jobs/await', { ids, wait_ms: 1000 });
    expect(res.statusCode).toBe(429);
    expect(res.json().detail).toContain('BATON_AWAIT_MAX_JOBS_PER_KEY');
    const fits = await as('hostile', 'POST', '/v1/jobs/await', { ids: ids.slice(0, 50), wait_ms: 100 });
    expect(fits.statusCode).toBe(200);
    expect(fits.json()).toMatchObject({ unfinished: 50 });
  });
});

describe('the answer of an await of large jobs', () => {
  const BUDGET = 1024 * 1024;
  let app: BatonApp;
  beforeAll(async () => {
    app = await createTestApp(database, {
      BATON_POLL_INTERVAL_MS: '30000',
      BATON_AWAIT_ANSWER_MAX_BYTES: String(BUDGET),
    });
  });
  afterAll(() => app?.close());

  it('keeps payloads and results in request order within the budget; the rest come without them, listed in omitted', async () => {
    const big = 'x'.repeat(200 * 1024);
    const created = await api(app).enqueueBatch(
      'large-await',
      Array.from({ length: 20 }, (_, i) => ({ payload: { i, big } })),
    );
    const ids: string[] = created.body.jobs.map((j: { id: string }) => j.id);
    const answer = api(app).call('POST', '/v1/jobs/await', { ids: [...ids, '987654321'], wait_ms: 30_000 });
    await until(() => app.wake.finishWaits.waiting() === 1);
    const claimed = await api(app).claim('large-await', { max_jobs: 20 });
    const acks = claimed.body.jobs.map((j: { id: string; lease_token: string }) => ({
      id: j.id,
      lease_token: j.lease_token,
      result: { big },
    }));
    expect((await api(app).ackBatch(acks)).status).toBe(200);
    const res = await answer;
    expect(res.status).toBe(200);
    const { jobs, omitted, finished, not_found } = res.body;
    expect(finished).toBe(20);
    expect(not_found).toEqual(['987654321']);
    // Each job's bodies are about 400 KB: two fit in 1 MiB, the rest are omitted, in request order.
    const whole = jobs.filter((j: { payload: unknown }) => j.payload !== null);
    expect(whole.map((j: { id: string }) => j.id)).toEqual(ids.slice(0, 2));
    for (const j of whole) expect(j).toMatchObject({ state: 'completed', result: { big } });
    expect(omitted).toEqual(ids.slice(2));
    for (const j of jobs.slice(2)) {
      expect(j).toMatchObject({ state: 'completed', payload: null, result: null, errors: [] });
    }
    expect(JSON.stringify(res.body).length).toBeLessThan(BUDGET + 100 * 1024);

    // A single job is always answered whole, as a plain read would.
    const one = await api(app).call('GET', `/v1/jobs/${ids[19]}?wait_ms=1000`);
    expect(one.body).toMatchObject({ payload: { i: 19, big }, result: { big } });
    const first = await api(app).call('POST', '/v1/jobs/await', { ids: [ids[19], ids[0]], wait_ms: 1000 });
    expect(first.body.omitted).toEqual([]);
    const two = await api(app).call('POST', '/v1/jobs/await', {
      ids: [ids[19], ids[0], ids[1]],
      wait_ms: 1000,
    });
    expect(two.body.omitted).toEqual([ids[1]]);
  });
});
