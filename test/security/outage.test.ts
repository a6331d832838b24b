import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BatonApp } from '../../src/app.js';
import { createTestApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { api } from '../support/http.js';
import { TcpProxy } from '../support/tcp-proxy.js';
import { until } from '../support/until.js';

const database = useTestDatabase();

describe('a database outage', () => {
  let proxy: TcpProxy;
  let app: BatonApp;
  beforeAll(async () => {
    proxy = await TcpProxy.start(database.url);
    app = await createTestApp(
      { url: proxy.urlFor(database.url) },
      { BATON_DB_CONNECT_TIMEOUT_MS: '1000', BATON_MAINTENANCE: 'true', BATON_TICK_MS: '500' },
    );
    await until(() => app.maintainer!.isLeader && app.wake.listener.connected);
  });
  afterAll(async () => {
    await app.close();
    await proxy.close();
  });

  it('answers 503 with Retry-After quickly, never hangs or crashes, and recovers by itself', async () => {
    expect((await api(app).enqueue('out', { payload: 'before' })).status).toBe(201);

    await proxy.cut();
    const calls = [
      () => api(app).enqueue('out', { payload: 'during' }),
      () => api(app).claim('out', { max_jobs: 5 }),
      () => api(app).claim('out', { wait_ms: 2000 }),
      () => api(app).get('1'),
      () => api(app).call('GET', '/v1/queues'),
      () => api(app).call('GET', '/readyz'),
    ];
    for (const call of calls) {
      const started = Date.now();
      const res = await call();
      expect(res.status, JSON.stringify(res.body)).toBe(503);
      expect(res.headers['retry-after']).toBe('1');
      expect(res.body.code).toBe('unavailable');
      expect(Date.now() - started).toBeLessThan(5000);
    }
    // Liveness is not readiness: the process is fine.
    expect((await api(app).call('GET', '/healthz')).status).toBe(200);
    await until(() => !app.maintainer!.isLeader && !app.wake.listener.connected);

    await proxy.restore();
    // Requests work again, the LISTEN connection comes back, and so does leadership.
    await until(async () => (await api(app).enqueue('out', { payload: 'after' })).status === 201);
    await until(() => app.wake.listener.connected && app.maintainer!.isLeader);
    const jobs = (await api(app).claim('out', { max_jobs: 10 })).body.jobs;
    expect(jobs.map((j: { payload: string }) => j.payload).sort()).toEqual(['after', 'before']);
    // Nothing half-written: the enqueue that got 503 did not create a job.
    const rows = await database.db
      .selectFrom('baton.jobs')
      .select('payload')
      .where('queue', '=', 'out')
      .execute();
    expect(rows.map((r) => r.payload)).not.toContain('during');
  }, 60_000);

  it('survives its backends being terminated (pg_terminate_backend)', async () => {
    expect((await api(app).enqueue('term', { payload: 1 })).status).toBe(201);
    await sql`SELECT pg_terminate_backend(pid) FROM pg_stat_activity
              WHERE datname = current_database() AND application_name LIKE 'baton%'`.execute(database.db);
    // At most a request or two meet a dead connection (503); then all is well again.
    const statuses: number[] = [];
    await until(async () => {
      const res = await api(app).enqueue('term', { payload: 2 });
      statuses.push(res.status);
      return res.status === 201;
    });
    expect(statuses.every((s) => s === 201 || s === 503)).toBe(true);
    await until(() => app.wake.listener.connected);
    await until(() => app.maintainer!.isLeader);
  }, 60_000);
});
