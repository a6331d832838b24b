import { readFile } from 'node:fs/promises';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BatonApp } from '../../src/app.js';
import { refreshFinishedStats, refreshLiveStats } from '../../src/maintenance/queue-stats.js';
import { createTestApp, useTestApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { api } from '../support/http.js';
import { metricValue } from '../support/prometheus.js';

const database = useTestDatabase();
const app = useTestApp(database);

async function scrape(target: BatonApp = app): Promise<string> {
  const res = await target.inject({ method: 'GET', url: '/metrics' });
  expect(res.statusCode).toBe(200);
  expect(res.headers['content-type']).toMatch(/^text\/plain/);
  return res.body;
}

describe('/metrics', () => {
  it('counts each step of the job loop by queue', async () => {
    const q = 'mx-loop';
    await api(app).enqueueBatch(q, [{ payload: 1 }, { payload: 2 }, { payload: 3 }, { payload: 4 }]);
    await api(app).enqueue(q, { payload: 5, idempotency_key: 'once' });
    await api(app).enqueue(q, { payload: 5, idempotency_key: 'once' }); // a repeat creates nothing
    const jobs = (await api(app).claim(q, { max_jobs: 4 })).body.jobs;
    await api(app).renew(jobs[0].id, { lease_token: jobs[0].lease_token });
    await api(app).ack(jobs[0].id, { lease_token: jobs[0].lease_token });
    await api(app).ack(jobs[0].id, { lease_token: '00000000-0000-4000-8000-000000000000' }); // 409: lease lost
    await api(app).nack(jobs[1].id, { lease_token: jobs[1].lease_token, retry_in_ms: 60_000 });
    await api(app).nack(jobs[2].id, { lease_token: jobs[2].lease_token, dead: true });
    await api(app).cancel(jobs[3].id);
    await api(app).renew(jobs[3].id, { lease_token: jobs[3].lease_token }); // 409: cancelled

    const text = await scrape();
    const v = (name: string, labels: Record<string, string> = {}) => metricValue(text, name, labels);
    expect(v('baton_jobs_enqueued_total', { queue: q })).toBe(5);
    expect(v('baton_jobs_claimed_total', { queue: q })).toBe(4);
    expect(v('baton_leases_renewed_total', { queue: q })).toBe(1);
    expect(v('baton_jobs_acked_total', { queue: q })).toBe(1);
    expect(v('baton_jobs_nacked_total', { queue: q, outcome: 'retry' })).toBe(1);
    expect(v('baton_jobs_nacked_total', { queue: q, outcome: 'dead' })).toBe(1);
    expect(v('baton_jobs_cancelled_total', { queue: q })).toBe(1);
    expect(v('baton_leases_lost_total', { queue: q, operation: 'ack' })).toBe(1);
    expect(v('baton_leases_lost_total', { queue: q, operation: 'renew' })).toBe(1);
    expect(v('baton_queue_lag_seconds_count', { queue: q })).toBe(4);
    expect(v('baton_claim_to_ack_seconds_count', { queue: q })).toBe(1);
    expect(
      v('baton_http_request_duration_seconds_count', {
        method: 'POST',
        route: '/v1/jobs/:id/ack',
        status_class: '2xx',
      }),
    ).toBe(1);
    expect(
      v('baton_http_request_duration_seconds_count', {
        method: 'POST',
        route: '/v1/jobs/:id/ack',
        status_class: '4xx',
      }),
    ).toBe(1);
  });

  it('reports queue state from the leader’s counts, not by counting per scrape', async () => {
    const q = 'mx-state';
    await api(app).enqueueBatch(q, [
      { payload: 1, run_at: '2020-01-01T00:00:00Z' },
      { payload: 2 },
      { payload: 3, delay_ms: 60_000 },
    ]);
    await refreshLiveStats(database.db);
    await refreshFinishedStats(database.db);
    let text = await scrape();
    expect(metricValue(text, 'baton_jobs', { queue: q, state: 'ready' })).toBe(2);
    expect(metricValue(text, 'baton_jobs', { queue: q, state: 'scheduled' })).toBe(1);
    expect(metricValue(text, 'baton_oldest_ready_job_seconds', { queue: q })).toBeGreaterThan(
      365 * 24 * 3600,
    );
    expect(metricValue(text, 'baton_queue_stats_age_seconds')).toBeLessThan(60);
    // New jobs do not show until the leader counts again: scrapes never count rows themselves.
    await api(app).enqueue(q, { payload: 4 });
    text = await scrape();
    expect(metricValue(text, 'baton_jobs', { queue: q, state: 'ready' })).toBe(2);
    await refreshLiveStats(database.db);
    text = await scrape();
    expect(metricValue(text, 'baton_jobs', { queue: q, state: 'ready' })).toBe(3);
  });

  it('caps the number of distinct queue labels', async () => {
    const capped = await createTestApp(database, { BATON_METRICS_MAX_QUEUES: '2' });
    try {
      for (const q of ['cap-a', 'cap-b', 'cap-c', 'cap-d']) await api(capped).enqueue(q, { payload: 1 });
      const text = await scrape(capped);
      expect(metricValue(text, 'baton_jobs_enqueued_total', { queue: 'cap-a' })).toBe(1);
      expect(metricValue(text, 'baton_jobs_enqueued_total', { queue: 'cap-b' })).toBe(1);
      expect(metricValue(text, 'baton_jobs_enqueued_total', { queue: 'cap-c' })).toBeUndefined();
      expect(metricValue(text, 'baton_jobs_enqueued_total', { queue: '_other' })).toBe(2);
    } finally {
      await capped.close();
    }
  });

  describe('on the leader', () => {
    let leader: BatonApp;
    beforeAll(async () => {
      leader = await createTestApp(database, { BATON_MAINTENANCE: 'true', BATON_TICK_MS: '300' });
    });
    afterAll(() => leader.close());

    it('shows leadership, re-arms, promotions and the last run of each duty', async () => {
      await api(leader).enqueue('mx-leader', { payload: 1 });
      const [job] = (await api(leader).claim('mx-leader')).body.jobs;
      await sql`UPDATE baton.jobs SET lease_expires_at = now() - interval '1 s' WHERE id = ${job.id}`.execute(
        database.db,
      );
      await api(leader).enqueue('mx-leader', { payload: 2, delay_ms: 100 });
      const duties = ['rearm', 'promote', 'prune', 'expire_keys', 'queue_gc', 'queue_stats'];
      let text = '';
      // Until the re-arm and the promotion are counted and every duty has run once (on a loaded
      // machine a duty's first run can come after the others').
      for (let i = 0; i < 100; i++) {
        text = await scrape(leader);
        if (
          (metricValue(text, 'baton_leases_rearmed_total', { outcome: 'ready' }) ?? 0) >= 1 &&
          (metricValue(text, 'baton_jobs_promoted_total') ?? 0) >= 1 &&
          duties.every(
            (duty) =>
              metricValue(text, 'baton_maintenance_last_success_timestamp_seconds', { duty }) !== undefined,
          )
        )
          break;
        await new Promise((r) => setTimeout(r, 50));
      }
      expect(metricValue(text, 'baton_leader')).toBe(1);
      expect(metricValue(text, 'baton_leases_rearmed_total', { outcome: 'ready' })).toBeGreaterThanOrEqual(1);
      expect(metricValue(text, 'baton_jobs_promoted_total')).toBeGreaterThanOrEqual(1);
      for (const duty of duties) {
        expect(
          metricValue(text, 'baton_maintenance_last_success_timestamp_seconds', { duty }),
        ).toBeGreaterThan(Date.now() / 1000 - 60);
      }
      expect(metricValue(text, 'baton_prune_total', { outcome: 'noop' })).toBeGreaterThanOrEqual(1);
      expect(metricValue(await scrape(app), 'baton_leader')).toBe(0);
    });
  });
});

describe('docs/metrics.md', () => {
  it('documents every metric the service exports, and no metric it does not', async () => {
    const doc = await readFile(new URL('../../docs/metrics.md', import.meta.url), 'utf8');
    const documented = new Set([...doc.matchAll(/^\| `(baton_[a-z_]+)` \|/gm)].map((m) => m[1]));
    const exported = (await app.metrics.registry.getMetricsAsJSON())
      .map((m) => m.name)
      .filter((name) => name.startsWith('baton_'));
    expect([...documented].sort()).toEqual([...new Set(exported)].sort());
  });
});
