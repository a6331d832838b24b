import os from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { createTestApp, listen, useListeningApp } from '../../../test/support/app.js';
import { useTestDatabase } from '../../../test/support/database.js';
import { api } from '../../../test/support/http.js';
import { until } from '../../../test/support/until.js';
import { Client, PermanentFailure, RetryLater } from '../src/index.js';
import { runWorker } from './in-process-worker.js';

/**
 * The worker runtime against a real Baton whose leader re-arms expired leases every half second,
 * so a lease the worker failed to keep would come back and show as a second attempt.
 */
const database = useTestDatabase();

describe('Worker', () => {
  const server = useListeningApp(database, { BATON_MAINTENANCE: 'true', BATON_TICK_MS: '500' });
  const job = async (id: string) => (await api(server.app).get(id)).body;
  /** How many renewal requests Baton has answered, from its metrics. */
  const renewRequests = async () => {
    const text = (await server.app.inject({ method: 'GET', url: '/metrics' })).body;
    return text
      .split('\n')
      .filter(
        (line) =>
          line.startsWith('baton_http_request_duration_seconds_count{') &&
          line.includes('route="/v1/jobs/renew"'),
      )
      .reduce((sum, line) => sum + Number(line.split(' ').at(-1)), 0);
  };
  const finished = (ids: string[]) => async () =>
    (await Promise.all(ids.map(job))).every((j) => ['completed', 'dead', 'scheduled'].includes(j.state));

  it('announces itself while it runs (the Workers page lists it with host, pid and concurrency) and says goodbye when it stops', async () => {
    const announced = async () =>
      (await server.app.inject({ method: 'GET', url: '/v1/workers' })).json().announced as {
        id: string;
        host: string;
        pid: number;
        concurrency: number;
        queues: string[];
        version: string;
      }[];
    const run = runWorker({ url: server.url, queue: 'announced', concurrency: 3, handler: () => null });
    try {
      await until(async () => (await announced()).some((w) => w.queues.includes('announced')));
      const [me] = (await announced()).filter((w) => w.queues.includes('announced'));
      expect(me).toMatchObject({
        host: os.hostname(),
        pid: process.pid,
        concurrency: 3,
        queues: ['announced'],
        version: expect.stringMatching(/^baton-client-ts\//),
      });
    } finally {
      await run.stop();
    }
    await run.done;
    expect((await announced()).filter((w) => w.queues.includes('announced'))).toEqual([]);
    expect(run.named('announce_failed')).toEqual([]);
  });

  it('runs the handler on each job and acks with its return value as the result', async () => {
    const baton = new Client({ url: server.url });
    const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    const jobs = await Promise.all(
      [1, 2, 3].map((n) => baton.enqueue('results', { n }, n === 1 ? { traceparent } : {})),
    );
    const seen: { payload: unknown; attempt: number; traceparent: string | null }[] = [];
    const run = runWorker<{ n: number }>({
      url: server.url,
      queue: 'results',
      handler: (claimed) => {
        seen.push({ payload: claimed.payload, attempt: claimed.attempt, traceparent: claimed.traceparent });
        return { doubled: claimed.payload.n * 2 };
      },
    });
    try {
      await until(finished(jobs.map((j) => j.id)));
      for (const [i, enqueued] of jobs.entries()) {
        expect(await job(enqueued.id)).toMatchObject({
          state: 'completed',
          attempts: 1,
          result: { doubled: (i + 1) * 2 },
        });
      }
      expect(seen).toContainEqual({ payload: { n: 1 }, attempt: 1, traceparent });
      expect(seen).toContainEqual({ payload: { n: 2 }, attempt: 1, traceparent: null });
    } finally {
      await run.stop();
    }
    await run.done;
    expect(run.named('acked').length).toBe(3);
    expect(run.events.at(-1)).toMatchObject({ event: 'drained', acked: 3 });
  });

  it('a throw nacks with the message, type and stack; RetryLater and retryInMs set the delay; PermanentFailure kills', async () => {
    const baton = new Client({ url: server.url });
    const [plain, later, retryIn, permanent, thrownString] = await Promise.all(
      ['plain', 'later', 'retryIn', 'permanent', 'string'].map((kind) => baton.enqueue('failures', { kind })),
    );
    const run = runWorker<{ kind: string }>({
      url: server.url,
      queue: 'failures',
      handler: ({ payload }) => {
        if (payload.kind === 'plain') throw new TypeError('no address');
        if (payload.kind === 'later') throw new RetryLater('mailbox busy', { delayMs: 3_600_000 });
        if (payload.kind === 'retryIn')
          throw Object.assign(new Error('rate limited'), { retryInMs: 7_200_000 });
        if (payload.kind === 'permanent') throw new PermanentFailure('bad input');
        throw 'a string';
      },
    });
    const ids = [plain!, later!, retryIn!, permanent!, thrownString!].map((j) => j.id);
    try {
      await until(finished(ids));
    } finally {
      await run.stop();
    }
    const failedAt = Date.now();
    const plainJob = await job(plain!.id);
    expect(plainJob.state).toBe('scheduled');
    expect(plainJob.last_error).toMatchObject({
      attempt: 1,
      message: 'no address',
      details: { type: 'TypeError', stack: expect.stringContaining('worker.test.ts') },
    });
    // The handler's delays, not the queue's backoff: an hour and two hours from the nack.
    const laterJob = await job(later!.id);
    expect(laterJob).toMatchObject({ state: 'scheduled', last_error: { message: 'mailbox busy' } });
    expect(Date.parse(laterJob.run_at) - failedAt).toBeGreaterThan(3_500_000);
    expect(Date.parse(laterJob.run_at) - failedAt).toBeLessThanOrEqual(3_600_000);
    const retryInJob = await job(retryIn!.id);
    expect(Date.parse(retryInJob.run_at) - failedAt).toBeGreaterThan(7_100_000);
    expect(await job(permanent!.id)).toMatchObject({
      state: 'dead',
      dead_reason: 'nacked_dead',
      last_error: { message: 'bad input', details: { type: 'PermanentFailure' } },
    });
    expect((await job(thrownString!.id)).last_error).toMatchObject({
      message: 'a string',
      details: { type: 'string' },
    });
    expect(run.named('nacked').length).toBe(5);
  });

  it('runs at most `concurrency` handlers at once, each ack claiming the job that takes its place', async () => {
    const baton = new Client({ url: server.url });
    const jobs = await baton.enqueueBatch(
      'slots',
      Array.from({ length: 30 }, (_, n) => ({ payload: { n } })),
    );
    let running = 0;
    let most = 0;
    const run = runWorker({
      url: server.url,
      queue: 'slots',
      concurrency: 3,
      handler: async () => {
        most = Math.max(most, ++running);
        await sleep(30);
        running--;
      },
    });
    try {
      await until(finished(jobs.map((j) => j.id)));
    } finally {
      await run.stop();
    }
    expect(most).toBe(3);
    for (const enqueued of jobs)
      expect(await job(enqueued.id)).toMatchObject({ state: 'completed', attempts: 1 });
    // Most jobs came in an ack's answer, not a claim of their own.
    const claimed = run.named('claimed');
    expect(claimed.length).toBe(30);
    expect(claimed.filter((e) => e.by === 'ack').length).toBeGreaterThan(15);
  });

  it('renews the lease of a handler that runs longer than it', async () => {
    const baton = new Client({ url: server.url });
    const long = await baton.enqueue('long', {});
    const run = runWorker({
      url: server.url,
      queue: 'long',
      leaseMs: 1000,
      handler: async () => {
        await sleep(3000);
        return 'done';
      },
    });
    try {
      await until(finished([long.id]));
    } finally {
      await run.stop();
    }
    expect(await job(long.id)).toMatchObject({ state: 'completed', attempts: 1, result: 'done' });
    expect(run.named('lease_lost')).toEqual([]);
  });

  it('keeps the final progress on the completed job: the ack carries the latest report', async () => {
    const baton = new Client({ url: server.url });
    const stepped = await baton.enqueue('progress', {});
    const run = runWorker({
      url: server.url,
      queue: 'progress',
      handler: (_job, { progress }) => {
        // Returned at once: no renewal has carried these; only the ack can.
        progress({ step: 1 });
        progress({ step: 2, of: 2 });
        return 'ok';
      },
    });
    try {
      await until(finished([stepped.id]));
    } finally {
      await run.stop();
    }
    expect(await job(stepped.id)).toMatchObject({ state: 'completed', progress: { step: 2, of: 2 } });
  });

  it('shows progress while the job runs (a report is sent within about a second)', async () => {
    const baton = new Client({ url: server.url });
    const slow = await baton.enqueue('progress-live', {});
    let release: () => void = () => {};
    const run = runWorker({
      url: server.url,
      queue: 'progress-live',
      handler: async (_job, { progress }) => {
        progress({ percent: 50 });
        await new Promise<void>((resolve) => {
          release = resolve;
        });
        return 'ok';
      },
    });
    try {
      await until(async () => (await job(slow.id)).progress?.percent === 50);
      expect((await job(slow.id)).state).toBe('claimed');
      release();
      await until(finished([slow.id]));
    } finally {
      release();
      await run.stop();
    }
  });

  it('under many progress reports and short leases, every job completes once with its last report and no lease is lost', async () => {
    const baton = new Client({ url: server.url });
    const jobs = await baton.enqueueBatch(
      'chatty',
      Array.from({ length: 200 }, (_, n) => ({ payload: { steps: 5 + (n % 40) } })),
    );
    const run = runWorker<{ steps: number }>({
      url: server.url,
      queue: 'chatty',
      concurrency: 20,
      // Jobs of 0.1-0.9 s under a 2 s lease: most are renewed once or twice (every third of the
      // lease, sooner with progress to deliver), and a renewal answered slowly on a loaded machine
      // still lands in time. With a 1 s lease (jobs under 0.2 s) a loaded CI machine once let one
      // expire: the test then measured the machine, not the worker.
      leaseMs: 2000,
      handler: async ({ payload }, { progress }) => {
        for (let step = 1; step <= payload.steps; step++) {
          progress({ step });
          await sleep(20);
        }
        return payload.steps;
      },
    });
    try {
      await until(finished(jobs.map((j) => j.id)), 60_000);
    } finally {
      await run.stop();
    }
    for (const enqueued of jobs) {
      const done = await job(enqueued.id);
      expect(done).toMatchObject({ state: 'completed', attempts: 1, progress: { step: done.result } });
    }
    expect(run.named('lease_lost')).toEqual([]);
    expect(run.named('dropped')).toEqual([]);
    expect(run.named('acked').length).toBe(200);
  }, 90_000);

  it('a progress report over 4096 bytes of JSON throws in the handler, and the last good one stands', async () => {
    const baton = new Client({ url: server.url });
    const big = await baton.enqueue('progress-big', {});
    const run = runWorker({
      url: server.url,
      queue: 'progress-big',
      handler: (_job, { progress }) => {
        progress({ ok: true });
        try {
          progress({ blob: 'x'.repeat(5000) });
        } catch (err) {
          return (err as Error).message;
        }
        return 'not refused';
      },
    });
    try {
      await until(finished([big.id]));
    } finally {
      await run.stop();
    }
    const done = await job(big.id);
    expect(done.result).toMatch(/progress is 50\d\d bytes of JSON; Baton keeps at most 4096/);
    expect(done.progress).toEqual({ ok: true });
  });

  it('a lost lease (the job cancelled while it runs) aborts the handler’s signal with the reason, and the worker never acks or nacks the job', async () => {
    const baton = new Client({ url: server.url });
    const doomed = await baton.enqueue('lost-in-process', {});
    let reason: unknown;
    let returned = false;
    const run = runWorker({
      url: server.url,
      queue: 'lost-in-process',
      leaseMs: 1500,
      handler: async (_job, { signal }) => {
        await new Promise<void>((resolve) =>
          signal.addEventListener('abort', () => resolve(), { once: true }),
        );
        reason = signal.reason;
        returned = true;
        return 'after the loss';
      },
    });
    try {
      await until(async () => (await job(doomed.id)).state === 'claimed');
      await api(server.app).cancel(doomed.id);
      await until(() => run.named('dropped').length === 1, 10_000);
      // Never renewed again: over three more renewal periods (a third of the lease each), Baton
      // sees no renewal request from this worker, which holds nothing else.
      const before = await renewRequests();
      await sleep(1500);
      expect(await renewRequests()).toBe(before);
    } finally {
      await run.stop();
    }
    expect(returned).toBe(true);
    expect(String((reason as Error).message)).toMatch(new RegExp(`lease of job ${doomed.id} was lost`));
    expect(run.named('lease_lost')).toEqual([expect.objectContaining({ id: doomed.id, during: 'renew' })]);
    expect([...run.named('acked'), ...run.named('nacked')]).toEqual([]);
    expect(await job(doomed.id)).toMatchObject({ state: 'cancelled', result: null });
  });

  it('stop() lets running handlers finish up to drainMs, then gives back the rest (ready, attempt uncounted) and aborts their signals', async () => {
    const baton = new Client({ url: server.url });
    const [quick, slow] = await baton.enqueueBatch('drain-in-process', [
      { payload: { ms: 300 } },
      { payload: { ms: 60_000 } },
    ]);
    const aborted: string[] = [];
    const run = runWorker<{ ms: number }>({
      url: server.url,
      queue: 'drain-in-process',
      drainMs: 1000,
      handler: async (claimed, { signal }) => {
        await sleep(claimed.payload.ms, undefined, { signal }).catch(() => aborted.push(claimed.id));
        return 'done';
      },
    });
    await until(() => run.named('claimed').length === 2);
    await run.stop();
    await run.done;
    expect(aborted).toEqual([slow!.id]);
    expect(await job(quick!.id)).toMatchObject({ state: 'completed', attempts: 1, result: 'done' });
    expect(await job(slow!.id)).toMatchObject({ state: 'ready', attempts: 0 });
    expect(run.named('gave_back').map((e) => e.id)).toEqual([slow!.id]);
    expect(run.events.at(-1)).toMatchObject({ event: 'drained', acked: 1, gave_back: 1 });
  });

  it('a result Baton refuses (over BATON_PAYLOAD_LIMIT_BYTES) fails the attempt with why, instead of letting the lease run out', async () => {
    const small = await createTestApp(database, { BATON_PAYLOAD_LIMIT_BYTES: '2048' });
    const url = await listen(small);
    try {
      const baton = new Client({ url });
      const big = await baton.enqueue('big-result', {}, { max_attempts: 1 });
      const run = runWorker({ url, queue: 'big-result', handler: () => ({ blob: 'x'.repeat(5000) }) });
      try {
        await until(async () => (await baton.get(big.id)).state === 'dead');
      } finally {
        await run.stop();
      }
      const dead = await baton.get(big.id);
      expect(dead.last_error?.message).toMatch(/^Baton refused the result: .*result/);
      expect(run.named('ack_failed')).toEqual([]);
    } finally {
      await small.close();
    }
  });
});
