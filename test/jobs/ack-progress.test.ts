import { describe, expect, it } from 'vitest';
import { ackAndClaimEach } from '../../src/jobs/claim/ack-and-claim.js';
import { PROGRESS_MAX_BYTES } from '../../src/jobs/limits.js';
import { useTestApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { api, enqueueAndClaim, enqueueAndClaimMany } from '../support/http.js';

/**
 * An ack (single, batch, with `next`) and a nack may carry the worker's progress: the job keeps it as
 * it ends (how far it got), shown by GET /v1/jobs/{id} and the lists. Left out, the job keeps what
 * its last renewal reported; JSON null clears it. Same rule and limit as renew's progress.
 */
const database = useTestDatabase();
const app = useTestApp(database);

const progressOf = async (id: string) => (await api(app).get(id)).body.progress;

const listed = async (queue: string, state: string) =>
  (await api(app).call('GET', `/v1/queues/${queue}/jobs?state=${state}`)).body.jobs as {
    id: string;
    progress: unknown;
  }[];

describe('progress on ack', () => {
  it('a single ack keeps its progress on the completed job; without it, the last renewed stays; null clears it', async () => {
    const [given, without, cleared] = await enqueueAndClaimMany(app, 'ap-single', 3);
    for (const job of [given, without, cleared]) {
      await api(app).renew(job.id, { lease_token: job.lease_token, progress: { of: 3, done: 2 } });
    }
    const res = await api(app).ack(given.id, {
      lease_token: given.lease_token,
      result: 'ok',
      progress: { of: 3, done: 3 },
    });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ state: 'completed', result: 'ok', progress: { of: 3, done: 3 } });
    await api(app).ack(without.id, { lease_token: without.lease_token });
    await api(app).ack(cleared.id, { lease_token: cleared.lease_token, progress: null });

    expect(await progressOf(given.id)).toEqual({ of: 3, done: 3 });
    expect(await progressOf(without.id)).toEqual({ of: 3, done: 2 });
    expect(await progressOf(cleared.id)).toBeNull();
    const byId = new Map((await listed('ap-single', 'completed')).map((j) => [j.id, j.progress]));
    expect(Object.fromEntries(byId)).toEqual({
      [given.id]: { of: 3, done: 3 },
      [without.id]: { of: 3, done: 2 },
      [cleared.id]: null,
    });
  });

  it('a repeated ack (its answer lost) answers the first ack, whose progress stands', async () => {
    const job = await enqueueAndClaim(app, 'ap-repeat');
    await api(app).ack(job.id, { lease_token: job.lease_token, progress: 'first' });
    const again = await api(app).ack(job.id, { lease_token: job.lease_token, progress: 'second' });
    expect(again.status).toBe(200);
    expect(again.body.progress).toBe('first');
    expect(await progressOf(job.id)).toBe('first');
  });

  it('a stale lease writes nothing', async () => {
    const job = await enqueueAndClaim(app, 'ap-stale');
    const res = await api(app).ack(job.id, {
      lease_token: '00000000-0000-4000-8000-000000000000',
      progress: 1,
    });
    expect(res.status).toBe(409);
    expect((await api(app).get(job.id)).body).toMatchObject({ state: 'claimed', progress: null });
  });

  it('concurrent single acks, some with progress and some without, each keep their own', async () => {
    // Concurrent acks share one statement (group commit): one carrying progress must not clear or
    // overwrite the others'.
    const jobs = await enqueueAndClaimMany(app, 'ap-grouped', 40);
    await api(app).renewBatch(
      jobs.map((j) => ({ id: j.id, lease_token: j.lease_token, progress: 'renewed' })),
    );
    const sent = (i: number) =>
      i % 3 === 0 ? { progress: { item: i } } : i % 3 === 1 ? {} : { progress: null };
    const answers = await Promise.all(
      jobs.map((j, i) => api(app).ack(j.id, { lease_token: j.lease_token, ...sent(i) })),
    );
    expect(answers.map((a) => a.status)).toEqual(jobs.map(() => 200));
    const kept = await Promise.all(jobs.map((j) => progressOf(j.id)));
    expect(kept).toEqual(jobs.map((_, i) => (i % 3 === 0 ? { item: i } : i % 3 === 1 ? 'renewed' : null)));
  });

  it('in a batch ack, each item on its own: with, without, null', async () => {
    const jobs = await enqueueAndClaimMany(app, 'ap-batch', 3);
    await api(app).renewBatch(jobs.map((j) => ({ id: j.id, lease_token: j.lease_token, progress: 'old' })));
    const res = await api(app).ackBatch([
      { id: jobs[0].id, lease_token: jobs[0].lease_token, progress: { step: 9 } },
      { id: jobs[1].id, lease_token: jobs[1].lease_token, result: 1 },
      { id: jobs[2].id, lease_token: jobs[2].lease_token, progress: null },
    ]);
    expect(res.body).toMatchObject({ acked: 3, failed: 0 });
    expect(await Promise.all(jobs.map((j) => progressOf(j.id)))).toEqual([{ step: 9 }, 'old', null]);
  });

  it(`an item beyond ${PROGRESS_MAX_BYTES} bytes is 413 naming it, and nothing of the batch is acked`, async () => {
    const jobs = await enqueueAndClaimMany(app, 'ap-big', 4);
    const big = 'x'.repeat(PROGRESS_MAX_BYTES);
    const res = await api(app).ackBatch([
      { id: jobs[0].id, lease_token: jobs[0].lease_token, progress: 1 },
      { id: jobs[1].id, lease_token: jobs[1].lease_token },
      { id: jobs[2].id, lease_token: jobs[2].lease_token, progress: null },
      { id: jobs[3].id, lease_token: jobs[3].lease_token, progress: big },
    ]);
    expect(res.status).toBe(413);
    expect(res.body).toMatchObject({ code: 'payload_too_large' });
    expect(res.body.detail).toMatch(/^acks\[3\]\.progress is \d+ bytes of JSON; the limit is 4096$/);
    const states = await Promise.all(jobs.map(async (j) => (await api(app).get(j.id)).body.state));
    expect(states).toEqual(['claimed', 'claimed', 'claimed', 'claimed']);

    const single = await api(app).ack(jobs[0].id, { lease_token: jobs[0].lease_token, progress: big });
    expect(single.status).toBe(413);
    expect(single.body.detail).toMatch(/^progress is/);
    const bad = await api(app).ack(jobs[0].id, { lease_token: jobs[0].lease_token, progress: 'a\u0000b' });
    expect(bad.status).toBe(400);
    expect(bad.body.detail).toContain('progress');
    expect((await api(app).get(jobs[0].id)).body.state).toBe('claimed');
  });

  it('with next (ack-and-claim), the completed job keeps the progress and the next job is claimed', async () => {
    const q = 'ap-next';
    const first = await enqueueAndClaim(app, q, { payload: 'first' });
    await api(app).enqueue(q, { payload: 'second' });
    const res = await api(app).ack(first.id, {
      lease_token: first.lease_token,
      progress: { pages: 12 },
      next: { max_jobs: 1 },
    });
    expect(res.status).toBe(200);
    expect(res.body.progress).toEqual({ pages: 12 });
    expect(res.body.next.map((j: { payload: string }) => j.payload)).toEqual(['second']);
    expect(await progressOf(first.id)).toEqual({ pages: 12 });

    // The batch ack with next too.
    const a = res.body.next[0];
    await api(app).enqueue(q, { payload: 'third' });
    const batch = await api(app).call('POST', '/v1/jobs/ack', {
      acks: [{ id: a.id, lease_token: a.lease_token, progress: 'all of it' }],
      next: { max_jobs: 1 },
    });
    expect(batch.body).toMatchObject({ acked: 1 });
    expect(batch.body.next.map((j: { payload: string }) => j.payload)).toEqual(['third']);
    expect(await progressOf(a.id)).toBe('all of it');
  });

  it("the one-statement ack-and-claim writes each ack's progress, keeping the job's for an ack without", async () => {
    const [x, y] = await enqueueAndClaimMany(app, 'ap-statement', 2);
    await api(app).renew(y.id, { lease_token: y.lease_token, progress: 'renewed' });
    await api(app).enqueueBatch('ap-statement', [{ payload: 'n1' }, { payload: 'n2' }]);
    const [outX, outY] = await ackAndClaimEach(database.db, 30_000, [
      { id: x.id, leaseToken: x.lease_token, progressJson: '{"done":true}', next: { maxJobs: 1 } },
      { id: y.id, leaseToken: y.lease_token, next: { maxJobs: 1 } },
    ]);
    expect(outX!.job).toMatchObject({ state: 'completed', progress: { done: true } });
    expect(outY!.job).toMatchObject({ state: 'completed', progress: 'renewed' });
    expect([...outX!.next, ...outY!.next].map((j) => j.payload_json).sort()).toEqual(['"n1"', '"n2"']);
    expect(await progressOf(x.id)).toEqual({ done: true });
    expect(await progressOf(y.id)).toBe('renewed');
  });
});

describe('progress on nack', () => {
  it('is kept on the job whether it is retried at once, later, or goes dead; left out, the job keeps its own', async () => {
    const now = await enqueueAndClaim(app, 'np-now', { payload: 1, max_attempts: 3 });
    const res = await api(app).nack(now.id, {
      lease_token: now.lease_token,
      retry_in_ms: 0,
      progress: 'half',
    });
    expect(res.body).toMatchObject({ state: 'ready', progress: 'half' });
    const again = (await api(app).claim('np-now')).body.jobs[0];
    expect(again.id).toBe(now.id);
    await api(app).nack(now.id, { lease_token: again.lease_token, retry_in_ms: 60_000 });
    expect((await api(app).get(now.id)).body).toMatchObject({ state: 'scheduled', progress: 'half' });

    const later = await enqueueAndClaim(app, 'np-later', { payload: 1, max_attempts: 3 });
    await api(app).nack(later.id, { lease_token: later.lease_token, retry_in_ms: 60_000, progress: [1, 2] });
    expect((await api(app).get(later.id)).body).toMatchObject({ state: 'scheduled', progress: [1, 2] });

    const dead = await enqueueAndClaim(app, 'np-dead');
    await api(app).renew(dead.id, { lease_token: dead.lease_token, progress: 'renewed' });
    await api(app).nack(dead.id, { lease_token: dead.lease_token, dead: true, progress: null });
    expect((await api(app).get(dead.id)).body).toMatchObject({ state: 'dead', progress: null });

    const big = await api(app).nack(later.id, {
      lease_token: later.lease_token,
      progress: 'x'.repeat(PROGRESS_MAX_BYTES),
    });
    expect(big.status).toBe(413);
    expect(big.body.detail).toMatch(/^progress is/);
  });
});
