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
    const stale = await client.enqueue('ex-claim', { payload: 'stale', priority: 10, expires_at: past() });
    const fresh = await client.enqueue('ex-claim', { payload: 'fresh', expires_in_ms: 60_000 });
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
