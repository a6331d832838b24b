import { describe, expect, it } from 'vitest';
import { useListeningApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { api } from '../support/http.js';
import { until } from '../support/until.js';
import { startWorker as start } from '../support/worker-process.js';

const database = useTestDatabase();

describe('example workers', () => {
  const server = useListeningApp(database, { BATON_MAINTENANCE: 'true', BATON_TICK_MS: '500' });
  const app = server.app;

  const states = async (ids: string[]) =>
    Promise.all(ids.map(async (id) => (await api(app).get(id)).body.state as string));

  it('examples/worker.ts (npm run worker) works jobs, renews long ones, reports progress, nacks failures, and drains on SIGTERM', async () => {
    const q = 'ex-ts';
    const quick = (
      await api(app).enqueueBatch(
        q,
        Array.from({ length: 20 }, (_, i) => ({ payload: { n: i } })),
      )
    ).body.jobs;
    const failing = (await api(app).enqueue(q, { payload: { dead: 'bad input' } })).body;
    // Runs 2.5 s under a 1.5 s lease: completes only if the worker renews it.
    const long = (await api(app).enqueue(q, { payload: { sleep_ms: 2500 } })).body;
    // Reports { done, of: 2 } after each step; the renewals carry them, and the ack the last one.
    const stepped = (await api(app).enqueue(q, { payload: { steps: 2, sleep_ms: 2500 } })).body;
    // Through `npm run worker`, as the README runs it: SIGTERM below goes to npm's PID.
    const worker = start('npm', ['run', '--silent', 'worker'], {
      BATON_URL: server.url,
      QUEUE: q,
      CONCURRENCY: '5',
      LEASE_MS: '1500',
    });
    try {
      const ids = [...quick.map((j: { id: string }) => j.id), long.id, stepped.id];
      await until(async () => (await states(ids)).every((s) => s === 'completed'));
      expect((await api(app).get(stepped.id)).body.progress).toEqual({ done: 2, of: 2 });
      expect((await api(app).get(failing.id)).body).toMatchObject({
        state: 'dead',
        dead_reason: 'nacked_dead',
      });
      expect((await api(app).get(long.id)).body.attempts).toBe(1);
      // Ack-and-claim: acks claimed the jobs that took their places.
      expect(worker.events.some((e) => e.event === 'claimed' && e.by === 'ack')).toBe(true);

      // Drain: SIGTERM while a job is in hand. It finishes and is acked; nothing new is claimed.
      const inHand = (await api(app).enqueue(q, { payload: { sleep_ms: 1500 } })).body;
      await until(async () => (await api(app).get(inHand.id)).body.state === 'claimed');
      worker.child.kill('SIGTERM');
      // The signal passes npm, sh and tsx before the worker sees it; on a loaded machine that can
      // take longer than the job in hand, whose ack would then still ask for a next job.
      await until(async () => worker.events.some((e) => e.event === 'stopping'));
      const later = (await api(app).enqueue(q, { payload: { n: 'after stop' } })).body;
      expect(await worker.exited).toBe(0);
      expect((await api(app).get(inHand.id)).body.state).toBe('completed');
      // The stopped worker never took the later job. (If its abandoned long-poll had the job claimed
      // for it in the instant before the server saw it leave, the lease runs out and the job returns.)
      expect(worker.events.some((e) => e.event === 'claimed' && e.id === later.id)).toBe(false);
      await until(async () => (await api(app).get(later.id)).body.state === 'ready');
      const events = worker.events.map((e) => e.event);
      expect(events).toContain('stopping');
      expect(events.at(-1)).toBe('drained');
    } finally {
      worker.child.kill('SIGKILL');
    }
  }, 60_000);

  it('examples/worker.sh with examples/send-mail.sh, as the README runs them: acks on success, nacks on failure', async () => {
    const q = 'ex-sh';
    const good = (await api(app).enqueue(q, { payload: { to: 'ada@example.com' } })).body;
    const bad = (await api(app).enqueue(q, { payload: { subject: 'no address' } })).body;
    const worker = start('examples/worker.sh', [], {
      BATON_URL: server.url,
      QUEUE: q,
      WAIT_MS: '1000',
      HANDLER: 'examples/send-mail.sh',
    });
    try {
      await until(async () => {
        const [g, b] = await states([good.id, bad.id]);
        return g === 'completed' && b === 'scheduled';
      });
      const done = (await api(app).get(good.id)).body;
      expect(done.result).toEqual({ sent_to: 'ada@example.com' });
      const failed = (await api(app).get(bad.id)).body;
      expect(failed.last_error).toMatchObject({
        message: 'payload has no "to" address\n',
        details: { exit_status: 2 },
      });
      worker.child.kill('SIGTERM');
      expect(await worker.exited).toBe(0);
      expect(worker.events.at(-1)).toMatchObject({ event: 'stopped' });
    } finally {
      worker.child.kill('SIGKILL');
    }
  }, 60_000);
});
