import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { nackJob } from '../../src/jobs/nack.js';
import { rearmExpiredLeases } from '../../src/maintenance/rearm.js';
import { useTestApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { api, enqueueAndClaim } from '../support/http.js';

/**
 * A nack with `give_back: true`: a worker shutting down hands back a job it has not finished. The job
 * is ready at once in its old place in claim order, and the attempt is not counted and records no
 * error, so a deploy neither makes jobs wait out their leases nor uses up their attempts.
 */
const database = useTestDatabase();
const app = useTestApp(database);

const STALE_TOKEN = '00000000-0000-4000-8000-000000000000';

/** Every row the job has, in every table: a job is in exactly one place. */
async function placesOf(id: string): Promise<string[]> {
  const { rows } = await sql<{ place: string }>`
    SELECT 'jobs:' || state AS place FROM baton.jobs WHERE id = ${id}
    UNION ALL SELECT 'scheduled' FROM baton.scheduled_jobs WHERE id = ${id}
    UNION ALL SELECT 'waiting' FROM baton.waiting_jobs WHERE id = ${id}
    UNION ALL SELECT 'history:' || state FROM baton.job_history WHERE id = ${id}`.execute(database.db);
  return rows.map((r) => r.place);
}

describe('nack with give_back', () => {
  it('a job on its only attempt is ready again, uncounted, and its next claim is attempt 1 again', async () => {
    const q = 'gb-last';
    const job = await enqueueAndClaim(app, q, { payload: 'p', max_attempts: 1 });
    expect(job.attempt).toBe(1);
    const res = await api(app).nack(job.id, { lease_token: job.lease_token, give_back: true });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      id: job.id,
      state: 'ready',
      attempts: 0,
      max_attempts: 1,
      last_error: null,
      errors: [],
      claimed_at: null,
      worker_id: null,
      lease_expires_at: null,
    });
    expect(res.body).not.toHaveProperty('lease_token');
    expect((await api(app).get(job.id)).body).toMatchObject({ state: 'ready', attempts: 0, errors: [] });

    // Given back again and again (deploy after deploy): never dead, never counted.
    let lease = job.lease_token;
    for (let round = 0; round < 3; round++) {
      const [again] = (await api(app).claim(q)).body.jobs;
      expect(again).toMatchObject({ id: job.id, attempt: 1 });
      expect(again.lease_token).not.toBe(lease);
      lease = again.lease_token;
      const given = await api(app).nack(job.id, { lease_token: lease, give_back: true });
      expect(given.body).toMatchObject({ state: 'ready', attempts: 0 });
    }
    // The old lease is gone: a give-back with it is a lost lease.
    expect((await api(app).nack(job.id, { lease_token: lease, give_back: true })).status).toBe(409);

    // A real failure on that only attempt still sends it to dead, as before.
    const [last] = (await api(app).claim(q)).body.jobs;
    const failed = await api(app).nack(job.id, { lease_token: last.lease_token, error: { message: 'no' } });
    expect(failed.body).toMatchObject({ state: 'dead', dead_reason: 'attempts_exhausted', attempts: 1 });
    expect(failed.body.errors).toHaveLength(1);
  });

  it('keeps its place: an older job given back is claimed before the newer ready jobs', async () => {
    const q = 'gb-place';
    const first = await api(app).enqueue(q, { payload: 'first' });
    const [claimed] = (await api(app).claim(q)).body.jobs;
    expect(claimed.id).toBe(first.body.id);
    await api(app).enqueueBatch(q, [{ payload: 'second' }, { payload: 'third' }]);
    await api(app).nack(claimed.id, { lease_token: claimed.lease_token, give_back: true });
    const next = (await api(app).claim(q, { max_jobs: 3 })).body.jobs;
    expect(next.map((j: { payload: string; attempt: number }) => `${j.payload}#${j.attempt}`)).toEqual([
      'first#1',
      'second#1',
      'third#1',
    ]);
  });

  it("records no error: the job's history of real failures stays as it was", async () => {
    const q = 'gb-history';
    const job = await enqueueAndClaim(app, q, { payload: 1, max_attempts: 5 });
    await api(app).nack(job.id, { lease_token: job.lease_token, retry_in_ms: 0, error: { message: 'e1' } });
    const [second] = (await api(app).claim(q)).body.jobs;
    expect(second.attempt).toBe(2);
    const res = await api(app).nack(job.id, {
      lease_token: second.lease_token,
      give_back: true,
      progress: { rows: 10 },
    });
    expect(res.body).toMatchObject({ state: 'ready', attempts: 1, progress: { rows: 10 } });
    expect(res.body.errors.map((e: { message: string }) => e.message)).toEqual(['e1']);
    expect(res.body.last_error).toMatchObject({ attempt: 1, message: 'e1' });
    const [third] = (await api(app).claim(q)).body.jobs;
    expect(third).toMatchObject({ id: job.id, attempt: 2 });
  });

  it('with next, the job given back is ready and may come straight back', async () => {
    const q = 'gb-next';
    const job = await enqueueAndClaim(app, q, { payload: 'only' });
    const res = await api(app).nack(job.id, {
      lease_token: job.lease_token,
      give_back: true,
      next: { max_jobs: 1 },
    });
    expect(res.status).toBe(200);
    expect(res.body.state).toBe('ready');
    expect(res.body.next).toHaveLength(1);
    expect(res.body.next[0]).toMatchObject({ id: job.id, attempt: 1 });
  });

  it('is guarded by the lease token: a stale token is 409 lease_lost and changes nothing', async () => {
    const job = await enqueueAndClaim(app, 'gb-stale');
    const res = await api(app).nack(job.id, { lease_token: STALE_TOKEN, give_back: true });
    expect(res.status).toBe(409);
    expect(res.body.code).toBe('lease_lost');
    expect((await api(app).get(job.id)).body).toMatchObject({ state: 'claimed', attempts: 1 });
    const unknown = await api(app).nack('987654321', { lease_token: STALE_TOKEN, give_back: true });
    expect(unknown.status).toBe(404);
  });

  it('400 naming the field with error, retry_in_ms or dead: true; the job stays claimed', async () => {
    const job = await enqueueAndClaim(app, 'gb-refused');
    const lease = { lease_token: job.lease_token, give_back: true };
    const refused = [
      [{ ...lease, error: { message: 'stopping' } }, 'error'],
      [{ ...lease, retry_in_ms: 0 }, 'retry_in_ms'],
      [{ ...lease, retry_in_ms: 5000 }, 'retry_in_ms'],
      [{ ...lease, dead: true }, 'dead'],
    ] as const;
    for (const [body, field] of refused) {
      const res = await api(app).nack(job.id, body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body.errors).toEqual([expect.objectContaining({ field })]);
      expect(res.body.detail).toContain(field);
    }
    expect((await api(app).get(job.id)).body).toMatchObject({ state: 'claimed', attempts: 1 });
    // dead: false and give_back: false are what they say.
    const ok = await api(app).nack(job.id, { ...lease, dead: false });
    expect(ok.body).toMatchObject({ state: 'ready', attempts: 0 });
    const [again] = (await api(app).claim('gb-refused')).body.jobs;
    const plain = await api(app).nack(job.id, {
      lease_token: again.lease_token,
      give_back: false,
      retry_in_ms: 0,
    });
    expect(plain.body).toMatchObject({ state: 'ready', attempts: 1 });
    expect(plain.body.errors).toHaveLength(1);
  });

  it("a job of another queue than the key's is not found, and stays claimed", async () => {
    const job = await enqueueAndClaim(app, 'gb-scope');
    const outcome = await nackJob(
      app.db,
      { id: job.id, leaseToken: job.lease_token, giveBack: true, queue: 'gb-other' },
      app.config,
    );
    expect(outcome).toEqual({ outcome: 'not_found' });
    expect((await api(app).get(job.id)).body.state).toBe('claimed');
  });

  it('with a unique key: takes the key back, or gives way to a newer job holding it, as a retry does', async () => {
    const q = 'gb-unique';
    const alone = await enqueueAndClaim(app, q, { payload: 'a', unique_key: 'ka' });
    const back = await api(app).nack(alone.id, { lease_token: alone.lease_token, give_back: true });
    expect(back.body).toMatchObject({ state: 'ready', attempts: 0 });
    expect((await api(app).enqueue(q, { payload: 'again', unique_key: 'ka' })).body.id).toBe(alone.id);

    const yielding = await enqueueAndClaim(app, `${q}-2`, { payload: 'old', unique_key: 'kb' });
    const newer = await api(app).enqueue(`${q}-2`, { payload: 'new', unique_key: 'kb' });
    expect(newer.status).toBe(201);
    const gave = await api(app).nack(yielding.id, { lease_token: yielding.lease_token, give_back: true });
    expect(gave.status).toBe(200);
    expect(gave.body.state).toBe('cancelled');
    expect(gave.body.last_error).toMatchObject({ reason: 'superseded', superseded_by: newer.body.id });
    const claimed = (await api(app).claim(`${q}-2`, { max_jobs: 5 })).body.jobs;
    expect(claimed.map((j: { id: string }) => j.id)).toEqual([newer.body.id]);
  });

  it('is counted in baton_jobs_nacked_total as given_back, not as a retry', async () => {
    const job = await enqueueAndClaim(app, 'gb-metrics');
    await api(app).nack(job.id, { lease_token: job.lease_token, give_back: true });
    const metrics = await app.inject({ method: 'GET', url: '/metrics' });
    expect(metrics.body).toContain('baton_jobs_nacked_total{queue="gb-metrics",outcome="given_back"} 1');
    expect(metrics.body).not.toContain('baton_jobs_nacked_total{queue="gb-metrics",outcome="retry"}');
  });
});

describe('give_back racing the re-arm and a cancel', () => {
  const ROUNDS = 40;

  it(`racing the re-arm of its expired lease (last attempt): ${ROUNDS} rounds, one winner, one place`, async () => {
    const q = 'gb-race-rearm';
    const wrong: string[] = [];
    const won = { give_back: 0, rearm: 0 };
    for (let round = 0; round < ROUNDS; round++) {
      const job = await enqueueAndClaim(app, q, { payload: round, max_attempts: 1 });
      await sql`UPDATE baton.jobs SET lease_expires_at = now() - interval '1 ms' WHERE id = ${job.id}`.execute(
        database.db,
      );
      const [given] = await Promise.all([
        api(app).nack(job.id, { lease_token: job.lease_token, give_back: true }),
        rearmExpiredLeases(database.db, 100),
      ]);
      const places = await placesOf(job.id);
      const now = (await api(app).get(job.id)).body;
      // Given back first: ready, uncounted, no error. Re-armed first: its only attempt failed on the
      // expired lease, so dead, and the give-back found no lease.
      const ok =
        places.length === 1 &&
        ((given.status === 200 &&
          places[0] === 'jobs:ready' &&
          now.attempts === 0 &&
          now.errors.length === 0) ||
          (given.status === 409 &&
            places[0] === 'history:dead' &&
            now.dead_reason === 'lease_expired' &&
            now.errors.length === 1));
      if (!ok) wrong.push(`${job.id}: ${given.status} ${places.join(',')} attempts ${now.attempts}`);
      won[given.status === 200 ? 'give_back' : 'rearm']++;
      // Leave nothing ready for the next round's claim.
      if (now.state === 'ready') await api(app).cancel(job.id);
    }
    console.log(`give_back against the re-arm, won by: ${JSON.stringify(won)}`);
    expect(wrong).toEqual([]);
  });

  it(`racing a cancel: ${ROUNDS} of ${ROUNDS} end cancelled, in one place, and no claim gets them`, async () => {
    const q = 'gb-race-cancel';
    const wrong: string[] = [];
    const first = { give_back: 0, cancel: 0 };
    for (let round = 0; round < ROUNDS; round++) {
      const job = await enqueueAndClaim(app, q, { payload: round });
      const [given, cancel] = await Promise.all([
        api(app).nack(job.id, { lease_token: job.lease_token, give_back: true }),
        api(app).cancel(job.id),
      ]);
      const places = await placesOf(job.id);
      const claimed = (await api(app).claim(q, { max_jobs: 10 })).body.jobs;
      const ok =
        [200, 409].includes(given.status) &&
        cancel.status === 200 &&
        cancel.body.state === 'cancelled' &&
        places.length === 1 &&
        places[0] === 'history:cancelled' &&
        claimed.length === 0;
      first[given.status === 200 ? 'give_back' : 'cancel']++;
      if (!ok) {
        wrong.push(`${job.id}: give_back ${given.status}, cancel ${cancel.status} ${places.join(',')}`);
      }
    }
    console.log(`give_back against a cancel, first: ${JSON.stringify(first)}`);
    expect(wrong).toEqual([]);
  });
});
