import { sql } from 'kysely';
import pg from 'pg';
import { beforeAll, describe, expect, it } from 'vitest';
import { claimStatement } from '../../src/jobs/claim/claim.js';
import { RING_SLOTS } from '../../src/jobs/ring.js';
import { noLog } from '../../src/logger.js';
import { VacuumDuty, type VacuumResult, vacuumLiveJobs } from '../../src/maintenance/vacuum.js';
import { Metrics } from '../../src/metrics/metrics.js';
import { useTestApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { api } from '../support/http.js';
import { metricValue } from '../support/prometheus.js';
import { until } from '../support/until.js';

const database = useTestDatabase();
const app = useTestApp(database);

beforeAll(async () => {
  // Autovacuum must not clean up behind the tests' backs: each test decides when vacuum runs.
  for (let slot = 0; slot < RING_SLOTS; slot++) {
    await sql`ALTER TABLE ${sql.table(`baton.jobs_${slot}`)} SET (autovacuum_enabled = false)`.execute(
      database.db,
    );
  }
});

/** Push `n` jobs through enqueue → claim → ack: each leaves two dead row versions in baton.jobs. */
async function churn(queue: string, n: number): Promise<void> {
  for (let done = 0; done < n; done += 500) {
    await api(app).enqueueBatch(
      queue,
      Array.from({ length: 500 }, (_, i) => ({ payload: done + i })),
    );
    const { jobs } = (await api(app).claim(queue, { max_jobs: 500 })).body;
    const acked = await api(app).ackBatch(
      jobs.map((j: { id: string; lease_token: string }) => ({ id: j.id, lease_token: j.lease_token })),
    );
    expect(acked.status).toBe(200);
  }
}

/**
 * PostgreSQL's count of dead rows in baton.jobs. Backends report their counts when they go idle,
 * but at most once a second; a backend that reported less than a second ago holds the rest back for
 * up to 10 s (PGSTAT_IDLE_INTERVAL), so waits on this count allow 20 s.
 */
async function deadRows(): Promise<number> {
  const { rows } = await sql<{ n: number }>`
    SELECT coalesce(sum(n_dead_tup), 0)::int AS n FROM pg_stat_user_tables
    WHERE relid IN (SELECT inhrelid FROM pg_inherits WHERE inhparent = 'baton.jobs'::regclass)`.execute(
    database.db,
  );
  return rows[0]!.n;
}

/** Shared buffers a claim of 10 touches, run for real inside a transaction that is rolled back. */
async function claimBuffers(queue: string): Promise<number> {
  const compiled = claimStatement({ queue, maxJobs: 10, defaultLeaseMs: 30_000 }).compile(database.db);
  // A session of the server's request pool, with its planner settings (src/db/database.ts).
  const client = await app.dbPool.connect();
  try {
    await client.query('BEGIN');
    const { rows } = await client.query(
      `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${compiled.sql}`,
      compiled.parameters as unknown[],
    );
    const plan = rows[0]['QUERY PLAN'][0].Plan;
    return plan['Shared Hit Blocks'] + plan['Shared Read Blocks'];
  } finally {
    await client.query('ROLLBACK');
    client.release();
  }
}

describe('vacuum of the live table', () => {
  it('waits below the threshold, then vacuums, and claims read fewer buffers afterwards', async () => {
    await sql`VACUUM baton.jobs`.execute(database.db);
    await api(app).enqueueBatch(
      'v-head',
      Array.from({ length: 50 }, (_, i) => ({ payload: i, priority: -1 })),
    );
    // Claimed and acked jobs leave dead entries at the head of the ready index, where claims start.
    await churn('v-head', 5000);
    await until(async () => (await deadRows()) >= 9000, 20_000);
    const bloated = await claimBuffers('v-head');

    const below = await vacuumLiveJobs(database.db, 1_000_000);
    expect(below).toMatchObject({ outcome: 'noop', remaining: 0 });
    expect(below.deadRows).toBeGreaterThanOrEqual(9000);

    const result = await vacuumLiveJobs(database.db, 5000);
    expect(result.outcome).toBe('vacuumed');
    expect(result.deadRows).toBeGreaterThanOrEqual(9000);
    expect(result.remaining).toBeLessThan(100);
    expect(await deadRows()).toBeLessThan(100);
    const clean = await claimBuffers('v-head');
    expect(clean).toBeLessThan(bloated * 0.8);

    // The 50 waiting jobs were never touched.
    const ready = await sql<{ n: number }>`
      SELECT count(*)::int AS n FROM baton.jobs WHERE queue = 'v-head' AND state = 'ready'`.execute(
      database.db,
    );
    expect(ready.rows[0]!.n).toBe(50);
  }, 60_000);

  it('names the open transaction that keeps dead rows from being removed, and warns', async () => {
    await sql`VACUUM baton.jobs`.execute(database.db);
    // A session that opened a transaction and went idle (a forgotten BEGIN, a long report).
    const idle = new pg.Client({ connectionString: database.url, application_name: 'forgotten-report' });
    await idle.connect();
    const warnings: object[] = [];
    const metrics = new Metrics();
    const duty = new VacuumDuty(
      database.db,
      metrics,
      { ...noLog, warn: (obj) => void warnings.push(obj) },
      1000,
      1000,
    );
    try {
      await idle.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
      await idle.query('SELECT 1');
      const pid = (await idle.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
      await churn('v-held', 1000);
      await until(async () => (await deadRows()) >= 2000, 20_000);
      await new Promise((r) => setTimeout(r, 1100));

      const held: VacuumResult = await duty.runOnce();
      expect(held.outcome).toBe('vacuumed');
      expect(held.remaining).toBeGreaterThanOrEqual(2000);
      expect(held.oldestTransactionSeconds).toBeGreaterThanOrEqual(1);
      expect(held.oldestTransaction).toMatchObject({ pid, application_name: 'forgotten-report' });
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toMatchObject({ dead_rows: held.remaining, oldest_transaction: { pid } });
      const text = await metrics.registry.metrics();
      expect(metricValue(text, 'baton_oldest_transaction_seconds')).toBeGreaterThanOrEqual(1);
      expect(metricValue(text, 'baton_live_table_dead_rows')).toBe(held.remaining);
      expect(metricValue(text, 'baton_vacuum_total', { outcome: 'vacuumed' })).toBe(1);

      // Once it ends, the next vacuum removes them.
      await idle.query('COMMIT');
      const freed = await duty.runOnce();
      expect(freed.outcome).toBe('vacuumed');
      expect(freed.remaining).toBeLessThan(100);
      expect(freed.oldestTransaction?.pid).not.toBe(pid);
      expect(warnings).toHaveLength(1);
    } finally {
      await idle.end();
    }
  }, 60_000);

  it('two leaders vacuuming at once while workers claim and ack: no error, every job once', async () => {
    // Dead rows from earlier work, so that the leaders' first check is due while the workers run.
    await churn('v-before', 1000);
    await until(async () => (await deadRows()) >= 2000, 20_000);
    const JOBS = 3000;
    for (let i = 0; i < JOBS; i += 1000) {
      await api(app).enqueueBatch(
        'v-race',
        Array.from({ length: 1000 }, (_, k) => ({ payload: i + k })),
      );
    }
    const acked: string[] = [];
    let draining = true;
    const worker = async () => {
      for (;;) {
        const { jobs } = (await api(app).claim('v-race', { max_jobs: 10 })).body;
        if (jobs.length === 0) return;
        const res = await api(app).ackBatch(
          jobs.map((j: { id: string; lease_token: string }) => ({ id: j.id, lease_token: j.lease_token })),
        );
        for (const r of res.body.results) if (r.outcome === 'acked') acked.push(r.id);
      }
    };
    const outcomes: string[] = [];
    const leader = async () => {
      while (draining) {
        outcomes.push((await vacuumLiveJobs(database.db, 1)).outcome);
        await new Promise((r) => setTimeout(r, 20));
      }
    };
    const leaders = [leader(), leader()];
    await Promise.all(Array.from({ length: 8 }, worker));
    draining = false;
    await Promise.all(leaders);

    expect(acked).toHaveLength(JOBS);
    expect(new Set(acked).size).toBe(JOBS);
    expect(outcomes).toContain('vacuumed');
    for (const o of outcomes) expect(['vacuumed', 'skipped', 'noop']).toContain(o);
    const left = await sql<{ n: number }>`
      SELECT count(*)::int AS n FROM baton.jobs WHERE queue = 'v-race'`.execute(database.db);
    expect(left.rows[0]!.n).toBe(0);
  }, 60_000);
});
