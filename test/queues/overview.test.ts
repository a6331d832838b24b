import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { ExpiryDuty } from '../../src/maintenance/expiry.js';
import { recordQueueHistory } from '../../src/maintenance/queue-history.js';
import { refreshFinishedStats, refreshLiveStats } from '../../src/maintenance/queue-stats.js';
import { RearmDuty } from '../../src/maintenance/rearm.js';
import { Metrics } from '../../src/metrics/metrics.js';
import { createTestApp, useTestApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { api, enqueueAndClaim } from '../support/http.js';
import { apiKeyEntry, bearer } from '../support/keys.js';

const database = useTestDatabase();
const app = useTestApp(database);

/** What the maintenance leader does every tick and every minute. */
async function leaderCounts() {
  await refreshLiveStats(database.db);
  await refreshFinishedStats(database.db, { olderThanMs: 0 });
  await recordQueueHistory(database.db);
}

const overview = async () => {
  const res = await api(app).call('GET', '/v1/overview');
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body;
};

describe('GET /v1/overview', () => {
  it('answers zeros and nothing to attend to before there is any work', async () => {
    const body = await overview();
    expect(body.totals).toEqual({
      queues: 0,
      paused: 0,
      waiting: 0,
      scheduled: 0,
      ready: 0,
      claimed: 0,
      dead: 0,
      failing: 0,
      counted_at: null,
      finished_counted_at: null,
    });
    expect(body.minutes).toEqual([]);
    expect(body.attention).toEqual([]);
  });

  it('sums every queue as the leader counted it, the last hour by minute, and puts failing queues first', async () => {
    const done = await enqueueAndClaim(app, 'ov-mail', { payload: 4 });
    await api(app).ack(done.id, { lease_token: done.lease_token });
    await api(app).enqueueBatch('ov-mail', [{ payload: 1 }, { payload: 2 }, { payload: 3 }]);
    for (let i = 0; i < 2; i++) {
      const poison = await enqueueAndClaim(app, 'ov-pdf', { payload: i });
      await api(app).nack(poison.id, {
        lease_token: poison.lease_token,
        dead: true,
        error: { message: 'bad pdf' },
      });
    }
    await api(app).enqueue('ov-quiet', { payload: 1, delay_ms: 3_600_000 });
    await api(app).call('POST', '/v1/queues/ov-quiet/pause');
    await leaderCounts();

    const body = await overview();
    expect(body.totals).toMatchObject({ queues: 3, paused: 1, ready: 3, scheduled: 1, claimed: 0, dead: 2 });
    expect(Date.parse(body.totals.counted_at)).toBeLessThanOrEqual(Date.parse(body.as_of));
    expect(Date.parse(body.totals.finished_counted_at)).toBeLessThanOrEqual(Date.parse(body.as_of));
    const hour = body.minutes.reduce(
      (sum: Record<string, number>, m: Record<string, number>) => ({
        enqueued: sum.enqueued! + m.enqueued!,
        completed: sum.completed! + m.completed!,
        failed: sum.failed! + m.failed!,
      }),
      { enqueued: 0, completed: 0, failed: 0 },
    );
    expect(hour).toEqual({ enqueued: 7, completed: 1, failed: 2 });
    // Failing first, then the paused one; the healthy queue is not listed.
    expect(body.attention.map((a: { queue: string }) => a.queue)).toEqual(['ov-pdf', 'ov-quiet']);
    expect(body.attention[0]).toMatchObject({ failed_last_hour: 2, dead: 2, paused: false });
  });

  it('counts failed attempts that retried (a retry storm with nothing dead yet), and jobs failing now', async () => {
    const before = await overview();
    const storm = await enqueueAndClaim(app, 'ov-storm', { payload: 'flaky', max_attempts: 10 });
    let lease = storm.lease_token;
    // Three failed attempts, each retried at once; then a lease that runs out (the leader re-arms it).
    for (let i = 0; i < 3; i++) {
      await api(app).nack(storm.id, { lease_token: lease, error: { message: `flaky ${i}` }, retry_in_ms: 0 });
      lease = (await api(app).claim('ov-storm')).body.jobs[0].lease_token;
    }
    await sql`UPDATE baton.jobs SET lease_expires_at = now() - interval '1 second' WHERE id = ${storm.id}`.execute(
      database.db,
    );
    await new RearmDuty(database.db, new Metrics(), () => {}, 1000, 1000).runOnce();
    // A job that expired unclaimed wrote an error entry too, but no attempt of it failed.
    await api(app).enqueue('ov-storm', {
      payload: 'stale',
      expires_at: new Date(Date.now() + 50).toISOString(),
    });
    await new Promise((r) => setTimeout(r, 100));
    await new ExpiryDuty(database.db, new Metrics(), 1000, 1000, () => {}).runOnce();
    await leaderCounts();

    const body = await overview();
    expect(body.totals.failing).toBe(before.totals.failing + 1);
    const attemptsFailed = (o: { minutes: { attempts_failed: number }[] }) =>
      o.minutes.reduce((n, m) => n + m.attempts_failed, 0);
    expect(attemptsFailed(body) - attemptsFailed(before)).toBe(4);
    const row = body.attention.find((a: { queue: string }) => a.queue === 'ov-storm');
    expect(row).toMatchObject({ attempts_failed_last_hour: 4, failing: 1, failed_last_hour: 1, dead: 1 });
    const queue = (await api(app).call('GET', '/v1/queues/ov-storm')).body;
    expect(queue.stats.failing).toBe(1);
    const [sample] = (await api(app).call('GET', '/v1/queues/ov-storm/history')).body.samples;
    expect(sample.attempts_failed).toBe(4);
  });

  it('dates dead jobs by their own count, and each queue in GET /v1/queues adds up to the total', async () => {
    const before = (await overview()).totals;
    const poison = await enqueueAndClaim(app, 'ov-pdf', { payload: 'late' });
    await api(app).nack(poison.id, { lease_token: poison.lease_token, dead: true, error: { message: 'x' } });
    // A tick counts live jobs only: dead stays as the last finished count says, with that count's time.
    await refreshLiveStats(database.db);
    const ticked = (await overview()).totals;
    expect(ticked.dead).toBe(before.dead);
    expect(ticked.finished_counted_at).toBe(before.finished_counted_at);
    expect(Date.parse(ticked.counted_at)).toBeGreaterThan(Date.parse(before.counted_at));

    await refreshFinishedStats(database.db, { olderThanMs: 0 });
    const { totals } = await overview();
    expect(totals.dead).toBe(before.dead + 1);
    expect(Date.parse(totals.finished_counted_at)).toBeGreaterThan(Date.parse(before.finished_counted_at));
    const { queues } = (await api(app).call('GET', '/v1/queues')).body as {
      queues: { stats: { dead: number; finished_refreshed_at: string } }[];
    };
    expect(queues.reduce((n, q) => n + q.stats.dead, 0)).toBe(totals.dead);
    expect(Math.max(...queues.map((q) => Date.parse(q.stats.finished_refreshed_at)))).toBe(
      Date.parse(totals.finished_counted_at),
    );
  });

  it('puts a queue whose oldest ready job waits over a minute on the list', async () => {
    await sql`UPDATE baton.jobs SET run_at = now() - interval '5 minutes' WHERE queue = 'ov-mail'`.execute(
      database.db,
    );
    await leaderCounts();
    const lagging = (await overview()).attention.find((a: { queue: string }) => a.queue === 'ov-mail');
    expect(lagging?.oldest_ready_age_ms).toBeGreaterThan(60_000);
  });

  it('shows a key limited to some queues only those queues, in every figure', async () => {
    const limited = await createTestApp(database, {
      BATON_API_KEYS: JSON.stringify([apiKeyEntry('limited', ['consumer'], ['ov-mail'])]),
    });
    try {
      const res = await limited.inject({ method: 'GET', url: '/v1/overview', headers: bearer('limited') });
      expect(res.statusCode).toBe(200);
      const body = res.json();
      expect(body.totals).toMatchObject({ queues: 1, dead: 0, paused: 0, scheduled: 0 });
      expect(body.minutes.reduce((n: number, m: { failed: number }) => n + m.failed, 0)).toBe(0);
      expect(body.attention.map((a: { queue: string }) => a.queue)).not.toContain('ov-pdf');
    } finally {
      await limited.close();
    }
  });
});
