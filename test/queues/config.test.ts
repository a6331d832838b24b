import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { HistoryPartitionsDuty } from '../../src/maintenance/history-partitions.js';
import { pruneFinishedJobs } from '../../src/maintenance/prune.js';
import { Metrics } from '../../src/metrics/metrics.js';
import { useTestApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { api, enqueueAndClaim } from '../support/http.js';

const database = useTestDatabase();
// A poll interval beyond any test here, so that a waiting claim that answers was woken.
const app = useTestApp(database, { BATON_POLL_INTERVAL_MS: '30000' });
const put = (queue: string, body: object) => api(app).call('PUT', `/v1/queues/${queue}`, body);

describe('PUT /v1/queues/{queue}', () => {
  it('creates an explicit queue (201) with the given settings and the rest inherited', async () => {
    const res = await put('q-new', { lease_ms: 120_000, backoff: { base_ms: 2000 } });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({
      name: 'q-new',
      auto_created: false,
      paused: false,
      lease_ms: 120_000,
      max_attempts: 5,
      backoff: { base_ms: 2000, max_ms: 3_600_000, jitter: true },
      retention: { completed_ms: 86_400_000, dead_ms: 1_209_600_000 },
    });
    expect(res.body.inherited).toEqual([
      'max_attempts',
      'backoff.max_ms',
      'backoff.jitter',
      'retention.completed_ms',
      'retention.dead_ms',
    ]);
  });

  it('updates (200): given fields change, omitted ones stay, null resets to the default', async () => {
    await put('q-upd', { lease_ms: 90_000, max_attempts: 9 });
    const res = await put('q-upd', { max_attempts: null, retention: { dead_ms: 1000 } });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ lease_ms: 90_000, max_attempts: 5, retention: { dead_ms: 1000 } });
    expect(res.body.inherited).toContain('max_attempts');
  });

  it('turns an auto-created queue into an explicit one', async () => {
    await api(app).enqueue('q-auto', { payload: 1 });
    expect((await api(app).call('GET', '/v1/queues/q-auto')).body.auto_created).toBe(true);
    const res = await put('q-auto', {});
    expect(res.status).toBe(200);
    expect(res.body.auto_created).toBe(false);
  });

  it.each([
    [{ lease_ms: 10 }, 'lease_ms must be >= 1000'],
    [{ max_attempts: 0 }, 'max_attempts must be >= 1'],
    [{ backoff: { base_ms: -1 } }, 'backoff.base_ms must be >= 0'],
    [{ backoff: { jitter: 'yes' } }, 'backoff.jitter must be boolean'],
    [{ retention: { dead_ms: '1d' } }, 'retention.dead_ms must be integer'],
    [{ retention: { forever: true } }, 'retention.forever is not a known field'],
    [{ paused: 1 }, 'paused must be boolean'],
    [{ priority: 1 }, 'priority is not a known field'],
    [
      { backoff: { base_ms: 5000, max_ms: 1000 } },
      'backoff.max_ms (1000) must be at least backoff.base_ms (5000)',
    ],
  ])('rejects %j with a 400 naming the field', async (body, detail) => {
    const res = await put('q-bad', body);
    expect(res.status).toBe(400);
    expect(res.body.detail).toContain(detail);
    expect((await api(app).call('GET', '/v1/queues/q-bad')).status).toBe(404);
  });

  it('rejects a backoff cap below an inherited base', async () => {
    const res = await put('q-bad-2', { backoff: { max_ms: 10 } });
    expect(res.status).toBe(400);
    expect(res.body.errors).toEqual([
      { field: 'backoff.max_ms', message: 'must be at least backoff.base_ms (1000)' },
    ]);
  });
});

describe('per-queue settings take effect at once', () => {
  it('max_attempts on enqueue, lease on claim, backoff on nack', async () => {
    await put('q-eff', { max_attempts: 7, lease_ms: 300_000, backoff: { base_ms: 20_000, jitter: false } });
    const enq = await api(app).enqueue('q-eff', { payload: 1 });
    expect(enq.body.max_attempts).toBe(7);
    const [job] = (await api(app).claim('q-eff')).body.jobs;
    expect(Date.parse(job.lease_expires_at) - Date.now()).toBeGreaterThan(290_000);
    const nacked = await api(app).nack(job.id, { lease_token: job.lease_token });
    const delay = Date.parse(nacked.body.run_at) - Date.now();
    expect(delay).toBeGreaterThan(19_000);
    expect(delay).toBeLessThanOrEqual(20_000);
    // Change the lease: the very next claim uses it.
    await put('q-eff', { lease_ms: 5000 });
    await api(app).enqueue('q-eff', { payload: 2 });
    const [next] = (await api(app).claim('q-eff')).body.jobs;
    expect(Date.parse(next.lease_expires_at) - Date.now()).toBeLessThanOrEqual(5000);
  });

  it('retention on prune', async () => {
    const defaults = { completedRetentionMs: 86_400_000, deadRetentionMs: 86_400_000 };
    const prune = async () => {
      await new HistoryPartitionsDuty(database.db, new Metrics(), 60_000, 1000, {
        lockTimeoutMs: 100,
        defaults,
      }).runOnce();
      await pruneFinishedJobs(database.db, { batchSize: 100, lockTimeoutMs: 100, defaults });
    };
    await put('q-ret', { retention: { completed_ms: 1000 } });
    await put('q-ret-long', { retention: { completed_ms: 2 * 86_400_000 } });
    const job = await enqueueAndClaim(app, 'q-ret');
    const held = await enqueueAndClaim(app, 'q-ret-long');
    await api(app).ack(job.id, { lease_token: job.lease_token });
    await api(app).ack(held.id, { lease_token: held.lease_token });
    // Held in its day by another queue's longer retention: pruned on its own, a row.
    await sql`UPDATE baton.job_history SET finished_at = now() - interval '2 seconds' WHERE id = ${job.id}`.execute(
      database.db,
    );
    await prune();
    expect((await api(app).get(job.id)).status).toBe(404);
    expect((await api(app).get(held.id)).status).toBe(200);
    // Past its queue's retention in a day past every retention: its day partition goes.
    await sql`UPDATE baton.job_history SET finished_at = now() - interval '4 days' WHERE id = ${held.id}`.execute(
      database.db,
    );
    await prune();
    expect((await api(app).get(held.id)).status).toBe(404);
  });
});

describe('pause and resume', () => {
  it('pause stops claims; in-flight leases carry on; resume restarts them and wakes waiters', async () => {
    await api(app).enqueueBatch('q-pause', [{ payload: 1 }, { payload: 2 }]);
    const [inFlight] = (await api(app).claim('q-pause')).body.jobs;
    const paused = await api(app).call('POST', '/v1/queues/q-pause/pause');
    expect(paused.status).toBe(200);
    expect(paused.body.paused).toBe(true);
    expect((await api(app).claim('q-pause')).body.jobs).toEqual([]);
    // Enqueues are still accepted.
    expect((await api(app).enqueue('q-pause', { payload: 3 })).status).toBe(201);
    expect((await api(app).renew(inFlight.id, { lease_token: inFlight.lease_token })).status).toBe(200);
    expect((await api(app).ack(inFlight.id, { lease_token: inFlight.lease_token })).status).toBe(200);

    const waiting = api(app).claim('q-pause', { wait_ms: 20_000, max_jobs: 10 });
    await new Promise((r) => setTimeout(r, 150));
    const resumedAt = Date.now();
    const resumed = await api(app).call('POST', '/v1/queues/q-pause/resume');
    expect(resumed.body.paused).toBe(false);
    const got = await waiting;
    expect(got.body.jobs).toHaveLength(2);
    // Resuming woke the waiter: neither the 30 s poll nor the end of wait_ms answered it.
    expect(Date.now() - resumedAt).toBeLessThan(10_000);
  });

  it('is 404 for an unknown queue', async () => {
    const res = await api(app).call('POST', '/v1/queues/q-nope/pause');
    expect(res.status).toBe(404);
    expect(res.body.code).toBe('queue_not_found');
  });
});

describe('delete and purge', () => {
  it('delete refuses with live jobs, and with force cancels them', async () => {
    await api(app).enqueue('q-del', { payload: 1, delay_ms: 60_000 });
    const claimed = await enqueueAndClaim(app, 'q-del');
    const refused = await api(app).call('DELETE', '/v1/queues/q-del');
    expect(refused.status).toBe(409);
    expect(refused.body).toMatchObject({ code: 'queue_not_empty' });
    const forced = await api(app).call('DELETE', '/v1/queues/q-del?force=true');
    expect(forced.status).toBe(200);
    expect(forced.body).toEqual({ name: 'q-del', deleted: true, cancelled: 2 });
    expect((await api(app).get(claimed.id)).body.state).toBe('cancelled');
    expect((await api(app).ack(claimed.id, { lease_token: claimed.lease_token })).status).toBe(409);
    expect((await api(app).call('GET', '/v1/queues/q-del')).status).toBe(404);
    expect((await api(app).call('DELETE', '/v1/queues/q-del')).status).toBe(404);
  });

  it('deletes an empty queue', async () => {
    await put('q-del-empty', {});
    expect((await api(app).call('DELETE', '/v1/queues/q-del-empty')).body.deleted).toBe(true);
  });

  it('purge cancels ready and scheduled jobs, not claimed ones, and says how many', async () => {
    await api(app).enqueueBatch('q-purge', [
      { payload: 1 },
      { payload: 2 },
      { payload: 3, delay_ms: 60_000 },
    ]);
    const claimed = await enqueueAndClaim(app, 'q-purge', { payload: 0, priority: 100 });
    const res = await api(app).call('POST', '/v1/queues/q-purge/purge');
    expect(res.body).toEqual({ cancelled: 3 });
    expect((await api(app).get(claimed.id)).body.state).toBe('claimed');
    const live = await database.db
      .selectFrom('baton.jobs')
      .select('id')
      .where('queue', '=', 'q-purge')
      .execute();
    expect(live.map((r) => r.id)).toEqual([claimed.id]);
  });
});
