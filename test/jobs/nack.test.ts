import { describe, expect, it } from 'vitest';
import { nackJob, nackReceipt } from '../../src/jobs/nack.js';
import { useTestApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { api, enqueueAndClaim } from '../support/http.js';

const database = useTestDatabase();
const app = useTestApp(database, { BATON_BACKOFF_BASE_MS: '1000' });

describe('nack', () => {
  it('without retry_in_ms schedules a retry after the backoff and records the error', async () => {
    const job = await enqueueAndClaim(app, 'n-backoff');
    const sentAt = Date.now();
    const res = await api(app).nack(job.id, {
      lease_token: job.lease_token,
      error: { message: 'smtp timeout', details: { code: 421 } },
    });
    const answeredAt = Date.now();
    expect(res.status).toBe(200);
    expect(res.body.state).toBe('scheduled');
    // Attempt 1 with base 1000 ms and jitter: between 500 and 1000 ms after the nack ran, which was
    // between sending it and its answer (bounds that hold however slow the machine is).
    const runAt = Date.parse(res.body.run_at);
    expect(runAt - sentAt).toBeGreaterThanOrEqual(500 - 5);
    expect(runAt - answeredAt).toBeLessThanOrEqual(1000);
    expect(res.body.last_error).toMatchObject({
      attempt: 1,
      message: 'smtp timeout',
      details: { code: 421 },
    });
    expect(res.body.errors).toHaveLength(1);
    expect((await api(app).claim('n-backoff')).body.jobs).toEqual([]);
  });

  it('with retry_in_ms 0 makes the job ready again at once; the next claim is attempt 2', async () => {
    const job = await enqueueAndClaim(app, 'n-now');
    const res = await api(app).nack(job.id, {
      lease_token: job.lease_token,
      retry_in_ms: 0,
      error: { message: 'e1' },
    });
    expect(res.body.state).toBe('ready');
    const [again] = (await api(app).claim('n-now')).body.jobs;
    expect(again).toMatchObject({ id: job.id, attempt: 2 });
    expect(again.lease_token).not.toBe(job.lease_token);
  });

  it('retried at once, a job goes behind the jobs that were ready before; with keepPlace it keeps its place', async () => {
    // keepPlace is what the SQS endpoint uses on FIFO queues (ChangeMessageVisibility to 0).
    const order: Record<string, string[]> = {};
    for (const keepPlace of [false, true]) {
      const queue = `n-place-${keepPlace}`;
      const first = await api(app).enqueue(queue, { payload: 'first' });
      await api(app).enqueue(queue, { payload: 'second' });
      const [claimed] = (await api(app).claim(queue)).body.jobs;
      expect(claimed.id).toBe(first.body.id);
      const outcome = await nackJob(
        database.db,
        { id: claimed.id, leaseToken: claimed.lease_token, retryInMs: 0, keepPlace },
        app.config,
      );
      expect(outcome.outcome).toBe('done');
      const next = (await api(app).claim(queue, { max_jobs: 2 })).body.jobs;
      order[String(keepPlace)] = next.map(
        (j: { payload: string; attempt: number }) => `${j.payload}#${j.attempt}`,
      );
    }
    expect(order).toEqual({ false: ['second#1', 'first#2'], true: ['first#2', 'second#1'] });
  });

  it('with dead: true dead-letters the job whatever its attempts', async () => {
    const job = await enqueueAndClaim(app, 'n-dead', { payload: 1, max_attempts: 10 });
    const res = await api(app).nack(job.id, {
      lease_token: job.lease_token,
      dead: true,
      error: { message: 'bad input' },
    });
    expect(res.body).toMatchObject({ state: 'dead', dead_reason: 'nacked_dead', attempts: 1 });
    expect(res.body.last_error.message).toBe('bad input');
  });

  it('on the last attempt dead-letters the job with attempts_exhausted', async () => {
    const q = 'n-exhausted';
    const job = await enqueueAndClaim(app, q, { payload: 1, max_attempts: 2 });
    await api(app).nack(job.id, {
      lease_token: job.lease_token,
      retry_in_ms: 0,
      error: { message: 'first' },
    });
    const [second] = (await api(app).claim(q)).body.jobs;
    const res = await api(app).nack(second.id, {
      lease_token: second.lease_token,
      error: { message: 'second' },
    });
    expect(res.body).toMatchObject({ state: 'dead', dead_reason: 'attempts_exhausted', attempts: 2 });
    expect(res.body.errors.map((e: { message: string }) => e.message)).toEqual(['first', 'second']);
    expect((await api(app).get(job.id)).body.state).toBe('dead');
  });

  it('with a bad retry_in_ms or error message is 400 naming it (409 and 404: lease-lost.test.ts)', async () => {
    const job = await enqueueAndClaim(app, 'n-wrong');
    const bad = await api(app).nack(job.id, { lease_token: job.lease_token, retry_in_ms: -1 });
    expect(bad.status).toBe(400);
    expect(bad.body.detail).toBe('retry_in_ms must be >= 0');
    const nul = await api(app).nack(job.id, { lease_token: job.lease_token, error: { message: 'a\u0000b' } });
    expect(nul.status).toBe(400);
    expect(nul.body.detail).toMatch(/^error.message must not contain the NUL/);
  });

  it('leaves its receipt on the job wherever it went: found by its token, not by another or outside its queue', async () => {
    // What a nack whose answer was lost reads back before it runs again (service/leases.ts).
    const cases = [
      { queue: 'n-rc-now', input: { retryInMs: 0 }, state: 'ready' },
      { queue: 'n-rc-later', input: { retryInMs: 60_000 }, state: 'scheduled' },
      { queue: 'n-rc-dead', input: { dead: true }, state: 'dead' },
      { queue: 'n-rc-back', input: { giveBack: true }, state: 'ready' },
    ];
    for (const { queue, input, state } of cases) {
      const job = await enqueueAndClaim(app, queue);
      const nack = { id: job.id, leaseToken: job.lease_token, ...input };
      expect(await nackReceipt(database.db, nack)).toBeUndefined();
      expect((await nackJob(database.db, nack, app.config)).outcome).toBe('done');
      const receipt = await nackReceipt(database.db, nack);
      expect(receipt?.job).toMatchObject({ id: job.id, queue, state });
      expect(receipt?.readyNow).toBe(state === 'ready');
      expect(await nackReceipt(database.db, { ...nack, queue })).toBeDefined();
      expect(await nackReceipt(database.db, { ...nack, queue: 'n-rc-other' })).toBeUndefined();
      const other = { ...nack, leaseToken: '00000000-0000-4000-8000-000000000000' };
      expect(await nackReceipt(database.db, other)).toBeUndefined();
    }
    // The receipt stays through the next attempt and its ack: the nack still reads as done.
    const job = await enqueueAndClaim(app, 'n-rc-acked');
    const nack = { id: job.id, leaseToken: job.lease_token, retryInMs: 0 };
    await nackJob(database.db, nack, app.config);
    const [again] = (await api(app).claim('n-rc-acked')).body.jobs;
    expect((await api(app).ack(again.id, { lease_token: again.lease_token })).status).toBe(200);
    expect((await nackReceipt(database.db, nack))?.job.state).toBe('completed');
  });
});
