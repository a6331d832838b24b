import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { useTestApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { api } from '../support/http.js';

const database = useTestDatabase();
const app = useTestApp(database);

const past = () => new Date(Date.now() - 1000).toISOString();

/** Let a job's expires_at pass (rather than wait for it). */
const expireNow = (id: string) =>
  sql`UPDATE baton.jobs SET expires_at = now() - interval '1 millisecond' WHERE id = ${id}::bigint`.execute(
    database.db,
  );

describe('expiry: expires_at / expires_in_ms', () => {
  it('shows expires_at on enqueue and GET; expires_in_ms counts from now', async () => {
    const client = api(app);
    const at = new Date(Date.now() + 3_600_000).toISOString();
    const a = await client.enqueue('ex-show', { payload: {}, expires_at: at });
    expect(a.status).toBe(201);
    expect(a.body.expires_at).toBe(at);
    const b = await client.enqueue('ex-show', { payload: {}, expires_in_ms: 60_000 });
    const inMs = new Date(b.body.expires_at).getTime() - Date.now();
    expect(inMs).toBeGreaterThan(50_000);
    expect(inMs).toBeLessThanOrEqual(60_000);
    expect((await client.get(b.body.id)).body.expires_at).toBe(b.body.expires_at);
    expect((await client.enqueue('ex-show', { payload: {} })).body.expires_at).toBeNull();
  });

  it('expires_at and expires_in_ms together are a 400 naming the field (single and batch)', async () => {
    const client = api(app);
    const one = await client.enqueue('ex-bad', { payload: {}, expires_at: past(), expires_in_ms: 5 });
    expect(one.status).toBe(400);
    expect(one.body.errors[0].field).toBe('expires_in_ms');
    const batch = await client.enqueueBatch('ex-bad', [
      { payload: 1 },
      { payload: 2, expires_at: past(), expires_in_ms: 5 },
    ]);
    expect(batch.status).toBe(400);
    expect(batch.body.errors[0].field).toBe('jobs[1].expires_in_ms');
    expect((await client.enqueue('ex-bad', { payload: {}, expires_in_ms: -1 })).status).toBe(400);
  });

  it('a claim never hands out an expired job, even before the sweep', async () => {
    const client = api(app);
    const stale = await client.enqueue('ex-claim', { payload: 'stale', priority: 10, expires_in_ms: 60_000 });
    const fresh = await client.enqueue('ex-claim', { payload: 'fresh', expires_in_ms: 60_000 });
    await expireNow(stale.body.id);
    const jobs = (await client.claim('ex-claim', { max_jobs: 10 })).body.jobs;
    expect(jobs.map((j: { id: string }) => j.id)).toEqual([fresh.body.id]);
    expect((await client.get(stale.body.id)).body.state).toBe('ready');
  });

  it('queues under flow control (limits, groups) skip expired jobs too', async () => {
    const client = api(app);
    await client.call('PUT', '/v1/queues/ex-limited', { concurrency_limit: 10 });
    const stale = await client.enqueue('ex-limited', { payload: 'stale', expires_in_ms: 60_000 });
    const fresh = await client.enqueue('ex-limited', { payload: 'fresh' });
    await expireNow(stale.body.id);
    const limited = (await client.claim('ex-limited', { max_jobs: 10 })).body.jobs;
    expect(limited.map((j: { id: string }) => j.id)).toEqual([fresh.body.id]);

    const g1 = await client.enqueue('ex-grouped', { payload: 'stale', group: 'a', expires_in_ms: 60_000 });
    const g2 = await client.enqueue('ex-grouped', { payload: 'fresh', group: 'b' });
    await expireNow(g1.body.id);
    const grouped = (await client.claim('ex-grouped', { max_jobs: 10 })).body.jobs;
    expect(grouped.map((j: { id: string }) => j.id)).toEqual([g2.body.id]);
  });

  it('a claimed job is not affected by its expires_at passing (it was claimed in time)', async () => {
    const client = api(app);
    const job = await client.enqueue('ex-claimed', { payload: {}, expires_in_ms: 60_000 });
    const [claimed] = (await client.claim('ex-claimed')).body.jobs;
    await expireNow(job.body.id);
    const acked = await client.ack(claimed.id, { lease_token: claimed.lease_token });
    expect(acked.status).toBe(200);
  });
});

describe('a job that could never run (expired by the time it is due) is refused', () => {
  const inMs = (ms: number) => new Date(Date.now() + ms).toISOString();

  /** A 400 naming `field`, and nothing written: the queue was never even created. */
  async function refused(queue: string, body: object, field: string) {
    const res = await api(app).enqueue(queue, { payload: {}, ...body });
    expect(res.status, JSON.stringify(res.body)).toBe(400);
    expect(res.body.code).toBe('validation_failed');
    expect(res.body.errors[0].field).toBe(field);
    expect(res.body.detail).toContain(field);
    expect((await api(app).call('GET', `/v1/queues/${queue}`)).status).toBe(404);
  }

  it.each([
    ['expires_in_ms 0 (the schema: at least 1)', { expires_in_ms: 0 }, 'expires_in_ms'],
    ['expires_at in the past', { expires_at: '2001-01-01T00:00:00Z' }, 'expires_at'],
    [
      'expires_at equal to run_at',
      { run_at: '2030-01-01T00:00:00Z', expires_at: '2030-01-01T00:00:00Z' },
      'expires_at',
    ],
    [
      'expires_at before run_at',
      { run_at: '2030-01-01T00:00:00Z', expires_at: '2029-12-31T23:59:59Z' },
      'expires_at',
    ],
    [
      'the same instant written with another offset',
      { run_at: '2030-01-01T02:00:00+02:00', expires_at: '2030-01-01T00:00:00Z' },
      'expires_at',
    ],
    [
      'expires_at after a past run_at, but past itself',
      { run_at: '2001-01-01T00:00:00Z', expires_at: '2002-01-01T00:00:00Z' },
      'expires_at',
    ],
    ['expires_in_ms equal to delay_ms', { delay_ms: 60_000, expires_in_ms: 60_000 }, 'expires_in_ms'],
    ['expires_in_ms below delay_ms', { delay_ms: 60_000, expires_in_ms: 1_000 }, 'expires_in_ms'],
    [
      'expires_in_ms ending before a future run_at',
      { run_at: '2030-01-01T00:00:00Z', expires_in_ms: 60_000 },
      'expires_in_ms',
    ],
  ])('%s: 400 naming the field', async (_, body, field) => {
    await refused(`ex-never-${field}-${Math.random().toString(36).slice(2, 8)}`, body, field);
  });

  it('expires_at within delay_ms of now (by the database clock) is refused; beyond it, accepted', async () => {
    await refused('ex-never-delay', { delay_ms: 3_600_000, expires_at: inMs(60_000) }, 'expires_at');
    const ok = await api(app).enqueue('ex-never-delay-ok', {
      payload: {},
      delay_ms: 60_000,
      expires_at: inMs(3_600_000),
    });
    expect(ok.status).toBe(201);
    expect(ok.body.state).toBe('scheduled');
  });

  it('jobs that can run a moment are accepted; times compare to the microsecond', async () => {
    const client = api(app);
    for (const body of [
      { expires_in_ms: 1 },
      { delay_ms: 60_000, expires_in_ms: 60_001 },
      { run_at: '2030-01-01T00:00:00.000001Z', expires_at: '2030-01-01T00:00:00.000002Z' },
      { run_at: '2001-01-01T00:00:00Z', expires_at: inMs(60_000) },
      { expires_at: inMs(60_000) },
    ]) {
      const res = await client.enqueue('ex-never-ok', { payload: {}, ...body });
      expect(res.status, JSON.stringify([body, res.body])).toBe(201);
    }
  });

  it('in a batch, the item is named by its index and the whole batch is refused', async () => {
    const res = await api(app).enqueueBatch('ex-never-batch', [
      { payload: 0 },
      { payload: 1, expires_in_ms: 60_000 },
      { payload: 2, run_at: '2030-01-01T00:00:00Z', expires_at: inMs(60_000) },
      { payload: 3, expires_at: '2001-01-01T00:00:00Z' },
    ]);
    expect(res.status).toBe(400);
    // One problem per answer: item 2, whose own values settle it (item 3 needs the clock).
    expect(res.body.errors).toEqual([{ field: 'jobs[2].expires_at', message: expect.any(String) }]);
    const clock = await api(app).enqueueBatch('ex-never-batch', [
      { payload: 0 },
      { payload: 1, delay_ms: 5_000, expires_in_ms: 10_000 },
      { payload: 2, expires_at: inMs(60_000) },
      { payload: 3, expires_at: '2001-01-01T00:00:00Z' },
    ]);
    expect(clock.status).toBe(400);
    expect(clock.body.errors[0].field).toBe('jobs[3].expires_at');
    expect((await api(app).call('GET', '/v1/queues/ex-never-batch')).status).toBe(404);
  });
});
