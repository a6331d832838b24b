import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { rearmExpiredLeases } from '../../src/maintenance/rearm.js';
import { useTestApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { api, enqueueAndClaim } from '../support/http.js';

const database = useTestDatabase();
const app = useTestApp(database);

const ms = (iso: string) => new Date(iso).getTime();

/** Move a claimed job's clock back: its deadline (and the lease capped at it) passed `agoMs` ago. */
const deadlinePassed = (id: string, agoMs = 1000) =>
  sql`UPDATE baton.jobs SET deadline_at = now() - ${agoMs}::integer * interval '1 millisecond',
                            lease_expires_at = now() - ${agoMs}::integer * interval '1 millisecond'
      WHERE id = ${id}::bigint`.execute(database.db);

describe('deadlines: timeout_ms', () => {
  it('caps the lease at claimed_at + timeout_ms and shows the deadline on claim and GET', async () => {
    const client = api(app);
    const job = await enqueueAndClaim(app, 'dl-cap', { payload: {}, timeout_ms: 5000 }, { lease_ms: 60_000 });
    const claimed = job as typeof job & { deadline_at: string };
    expect(claimed.lease_expires_at).toBe(claimed.deadline_at);
    const read = (await client.get(job.id)).body;
    expect(read.timeout_ms).toBe(5000);
    expect(read.deadline_at).toBe(claimed.deadline_at);
    expect(ms(read.deadline_at) - ms(read.claimed_at)).toBe(5000);
    // A lease shorter than the budget is left as it is.
    const short = await enqueueAndClaim(
      app,
      'dl-cap',
      { payload: {}, timeout_ms: 60_000 },
      { lease_ms: 5000 },
    );
    const shortRead = (await client.get(short.id)).body;
    expect(ms(shortRead.lease_expires_at) - ms(shortRead.claimed_at)).toBe(5000);
    expect(ms(shortRead.deadline_at) - ms(shortRead.claimed_at)).toBe(60_000);
    // Without any budget: no deadline.
    const none = await enqueueAndClaim(app, 'dl-cap');
    expect((none as unknown as { deadline_at: string | null }).deadline_at).toBeNull();
    expect((await client.get(none.id)).body).toMatchObject({ timeout_ms: null, deadline_at: null });
  });

  it('takes the queue default (PUT /v1/queues), overridden by the job and reset with null', async () => {
    const client = api(app);
    const put = await client.call('PUT', '/v1/queues/dl-queue', { timeout_ms: 3000 });
    expect(put.status).toBe(201);
    expect(put.body.timeout_ms).toBe(3000);
    const inherited = await enqueueAndClaim(app, 'dl-queue', { payload: {} }, { lease_ms: 60_000 });
    const a = (await client.get(inherited.id)).body;
    expect(a.timeout_ms).toBeNull();
    expect(ms(a.deadline_at) - ms(a.claimed_at)).toBe(3000);
    const own = await enqueueAndClaim(
      app,
      'dl-queue',
      { payload: {}, timeout_ms: 7000 },
      { lease_ms: 60_000 },
    );
    const b = (await client.get(own.id)).body;
    expect(ms(b.deadline_at) - ms(b.claimed_at)).toBe(7000);

    const reset = await client.call('PUT', '/v1/queues/dl-queue', { timeout_ms: null });
    expect(reset.status).toBe(200);
    expect(reset.body.timeout_ms).toBeNull();
    const after = await enqueueAndClaim(app, 'dl-queue');
    expect((await client.get(after.id)).body.deadline_at).toBeNull();
  });

  it('refuses a timeout_ms out of range with a 400 naming the field', async () => {
    const client = api(app);
    const bad = await client.enqueue('dl-bad', { payload: {}, timeout_ms: 999 });
    expect(bad.status).toBe(400);
    expect(JSON.stringify(bad.body)).toContain('timeout_ms');
    const batch = await client.enqueueBatch('dl-bad', [
      { payload: 1 },
      { payload: 2, timeout_ms: 700_000_000 },
    ]);
    expect(batch.status).toBe(400);
    expect(JSON.stringify(batch.body)).toContain('timeout_ms');
    const queue = await client.call('PUT', '/v1/queues/dl-bad', { timeout_ms: 10 });
    expect(queue.status).toBe(400);
  });

  it('a renewal never extends the lease past the deadline; past it, 409 deadline_exceeded', async () => {
    const client = api(app);
    const job = await enqueueAndClaim(app, 'dl-renew', { payload: {}, timeout_ms: 4000 }, { lease_ms: 1000 });
    const deadline = (await client.get(job.id)).body.deadline_at as string;
    const renewed = await client.renew(job.id, { lease_token: job.lease_token, lease_ms: 60_000 });
    expect(renewed.status).toBe(200);
    expect(renewed.body.lease_expires_at).toBe(deadline);

    await deadlinePassed(job.id);
    const late = await client.renew(job.id, { lease_token: job.lease_token });
    expect(late.status).toBe(409);
    expect(late.body.code).toBe('deadline_exceeded');
    const batch = await client.renewBatch([{ id: job.id, lease_token: job.lease_token }]);
    expect(batch.body.results[0].outcome).toBe('deadline_exceeded');
    // A wrong token is still lease_lost, deadline or not.
    const wrong = await client.renew(job.id, { lease_token: '3f0e9a52-6a43-4a0c-9d4e-52d1b6e0c001' });
    expect(wrong.body.code).toBe('lease_lost');
  });

  it('the re-arm fails the attempt at the deadline with its own reason, apart from an expired lease', async () => {
    const client = api(app);
    const timed = await enqueueAndClaim(app, 'dl-rearm', { payload: {}, timeout_ms: 4000, max_attempts: 3 });
    const lapsed = await enqueueAndClaim(app, 'dl-rearm', {
      payload: {},
      timeout_ms: 60_000,
      max_attempts: 3,
    });
    await deadlinePassed(timed.id);
    // An ordinary lapse: the lease ran out well before the deadline.
    await sql`UPDATE baton.jobs SET lease_expires_at = now() - interval '1 second' WHERE id = ${lapsed.id}::bigint`.execute(
      database.db,
    );
    const result = await rearmExpiredLeases(database.db, 100);
    expect(result.ready.get('dl-rearm')).toBe(2);
    const t = (await client.get(timed.id)).body;
    expect(t.state).toBe('ready');
    expect(t.deadline_at).toBeNull();
    expect(t.last_error).toMatchObject({
      reason: 'deadline_exceeded',
      message: 'deadline exceeded',
      attempt: 1,
    });
    const l = (await client.get(lapsed.id)).body;
    expect(l.last_error).toMatchObject({ reason: 'lease_expired', message: 'lease expired' });
    // The next attempt gets a fresh budget.
    const again = (await client.claim('dl-rearm', { max_jobs: 2, lease_ms: 60_000 })).body.jobs;
    const next = again.find((j: { id: string }) => j.id === timed.id);
    expect(ms(next.deadline_at) - Date.now()).toBeGreaterThan(2000);
  });

  it('on the last attempt the job dies with dead_reason deadline_exceeded', async () => {
    const client = api(app);
    const job = await enqueueAndClaim(app, 'dl-dead', { payload: {}, timeout_ms: 4000, max_attempts: 1 });
    await deadlinePassed(job.id);
    const result = await rearmExpiredLeases(database.db, 100);
    expect(result.dead.get('dl-dead')).toBe(1);
    const dead = (await client.get(job.id)).body;
    expect(dead).toMatchObject({ state: 'dead', dead_reason: 'deadline_exceeded', timeout_ms: 4000 });
    expect(dead.errors.map((e: { reason: string }) => e.reason)).toEqual(['deadline_exceeded']);
  });

  it('renewals racing the re-arm at the deadline never pass it, and the attempt fails there', async () => {
    const client = api(app);
    const job = await enqueueAndClaim(app, 'dl-race', { payload: {}, timeout_ms: 1000 }, { lease_ms: 1000 });
    const deadline = ms((await client.get(job.id)).body.deadline_at);
    const expiries: number[] = [];
    const statuses = new Set<number>();
    let rearmed = false;
    const renewing = (async () => {
      while (!rearmed) {
        const r = await client.renew(job.id, { lease_token: job.lease_token, lease_ms: 60_000 });
        statuses.add(r.status);
        if (r.status === 200) expiries.push(ms(r.body.lease_expires_at));
        else expect(['deadline_exceeded', 'lease_lost']).toContain(r.body.code);
      }
    })();
    const rearming = (async () => {
      for (let i = 0; i < 500 && !rearmed; i++) {
        if ((await rearmExpiredLeases(database.db, 100)).total > 0) rearmed = true;
        else await new Promise((r) => setTimeout(r, 10));
      }
      rearmed = true;
    })();
    await Promise.all([renewing, rearming]);
    expect(expiries.length).toBeGreaterThan(0);
    for (const e of expiries) expect(e).toBeLessThanOrEqual(deadline);
    const after = (await client.get(job.id)).body;
    expect(after.state).toBe('ready');
    expect(after.last_error.reason).toBe('deadline_exceeded');
    expect(Date.parse(after.last_error.at)).toBeGreaterThanOrEqual(deadline);
    const late = await client.renew(job.id, { lease_token: job.lease_token });
    expect(late.status).toBe(409);
  });
});
