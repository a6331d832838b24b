import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BatonApp } from '../../src/app.js';
import { promoteDueJobs } from '../../src/maintenance/promote.js';
import { createTestApp, useTestApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { api } from '../support/http.js';

const database = useTestDatabase();
const app = useTestApp(database);

const makeDue = (queue: string) =>
  sql`UPDATE baton.scheduled_jobs SET run_at = now() - interval '1 second' WHERE queue = ${queue}`.execute(
    database.db,
  );

describe('promote', () => {
  it('makes due scheduled jobs ready and leaves future ones scheduled', async () => {
    const due = await api(app).enqueue('p-basic', { payload: 1, delay_ms: 60_000 });
    await makeDue('p-basic');
    const later = await api(app).enqueue('p-basic', { payload: 2, delay_ms: 60_000 });
    const result = await promoteDueJobs(database.db, 100, 1000);
    expect(result.byQueue.get('p-basic')).toBe(1);
    expect((await api(app).get(due.body.id)).body.state).toBe('ready');
    expect((await api(app).get(later.body.id)).body.state).toBe('scheduled');
    const [claimed] = (await api(app).claim('p-basic')).body.jobs;
    expect(claimed.id).toBe(due.body.id);
  });

  it('a busy queue does not delay another: each queue gets its share of a run', async () => {
    await api(app).enqueueBatch(
      'p-busy',
      Array.from({ length: 1000 }, () => ({ payload: 1, delay_ms: 60_000 })),
    );
    await api(app).enqueueBatch(
      'p-busy',
      Array.from({ length: 1000 }, () => ({ payload: 1, delay_ms: 60_000 })),
    );
    await api(app).enqueue('p-quiet', { payload: 1, delay_ms: 60_000 });
    await makeDue('p-busy');
    await makeDue('p-quiet');
    const first = await promoteDueJobs(database.db, 100, 1000);
    expect(first.byQueue.get('p-quiet')).toBe(1);
    expect(first.byQueue.get('p-busy')).toBe(100);
    expect(first.more).toBe(true);
  });

  it('concurrent promoters promote each job once', async () => {
    await api(app).enqueueBatch(
      'p-race',
      Array.from({ length: 500 }, () => ({ payload: 1, delay_ms: 60_000 })),
    );
    await makeDue('p-race');
    const runs = await Promise.all(
      Array.from({ length: 4 }, async () => {
        let n = 0;
        while (true) {
          const r = await promoteDueJobs(database.db, 25, 25);
          n += r.byQueue.get('p-race') ?? 0;
          if (!r.more) return n;
        }
      }),
    );
    expect(runs.reduce((a, b) => a + b, 0)).toBe(500);
    const ready = await sql<{ n: number }>`
      SELECT count(*)::int AS n FROM baton.jobs WHERE queue = 'p-race' AND state = 'ready'`.execute(
      database.db,
    );
    expect(ready.rows[0]!.n).toBe(500);
  });
});

describe('promote on a running leader', () => {
  let leader: BatonApp;
  beforeAll(async () => {
    leader = await createTestApp(database, { BATON_MAINTENANCE: 'true', BATON_TICK_MS: '1000' });
    for (let i = 0; i < 100 && !leader.maintainer?.isLeader; i++) await new Promise((r) => setTimeout(r, 50));
    expect(leader.maintainer?.isLeader).toBe(true);
  });
  afterAll(() => leader.close());

  it('a delayed job is claimable within about a second of its run_at, waking a long-poll', async () => {
    const enq = await api(leader).enqueue('p-live', { payload: 1, delay_ms: 1000 });
    const runAt = Date.parse(enq.body.run_at);
    const res = await api(leader).claim('p-live', { wait_ms: 5000 });
    const claimedAt = Date.now();
    expect(res.body.jobs.map((j: { id: string }) => j.id)).toEqual([enq.body.id]);
    expect(claimedAt).toBeGreaterThanOrEqual(runAt - 50);
    expect(claimedAt - runAt).toBeLessThan(1200);
  });

  it('a nacked job comes back after its backoff', async () => {
    await api(leader).enqueue('p-retry', { payload: 1 });
    const [job] = (await api(leader).claim('p-retry')).body.jobs;
    const nacked = await api(leader).nack(job.id, { lease_token: job.lease_token, retry_in_ms: 600 });
    expect(nacked.body.state).toBe('scheduled');
    const res = await api(leader).claim('p-retry', { wait_ms: 5000 });
    expect(res.body.jobs[0]).toMatchObject({ id: job.id, attempt: 2 });
  });
});
