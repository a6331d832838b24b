import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import type { Database } from '../../src/db/schema.js';
import { vacuumLiveJobs } from '../../src/maintenance/vacuum.js';
import { ackSql, claimSql } from '../compiled-statements.js';
import type { BenchContext } from '../context.js';
import { DATABASES, databaseUrl } from '../databases.js';
import { explainClaim } from '../explain-claim.js';
import type { Metric, ScenarioResult } from '../report.js';
import { fmt, median, percentile } from '../stats.js';

/**
 * Claim cost under sustained churn, with and without the leader's vacuum duty
 * (src/maintenance/vacuum.ts), leaving the rest to the server's autovacuum.
 *
 * Scenario 4 shows claim cost flat in every backlog, but also that dead index entries from claims
 * and acks slow claims down until something vacuums. Here several workers claim and ack
 * without pause for a fixed time while a producer keeps the ready backlog constant, once with the
 * vacuum duty running on the default tick and threshold, once without it (the server's own
 * autovacuum settings, autovacuum_naptime included; the setup line records them), interleaved. Reported: claim statement latency (p50,
 * p99), the buffers a claim of 10 touches (sampled every second), and jobs per second. Statements
 * run over SQL, as the server sends them, so only the database side is measured.
 */

const QUEUE = 'churn';
const CLAIM = 50;
const BACKLOG = 2_000;
const TICK_MS = 5_000;
const DEAD_ROWS = 10_000;
const SYSTEMS = ['vacuum duty', 'without the duty'] as const;
type System = (typeof SYSTEMS)[number];

interface Run {
  claimMs: number[];
  buffers: number[];
  jobs: number;
  seconds: number;
  vacuums: number;
}

async function churn(
  pool: pg.Pool,
  db: Kysely<Database>,
  system: System,
  seconds: number,
  workers: number,
): Promise<Run> {
  await pool.query('DELETE FROM baton.jobs WHERE queue = $1', [QUEUE]);
  await pool.query('VACUUM baton.jobs');
  const insert = `INSERT INTO baton.jobs (slot, id, queue, state, run_at, max_attempts, payload)
    SELECT baton.job_slot(id), id, $1, 'ready', now(), 5, jsonb_build_object('i', g)
    FROM (SELECT nextval('baton.jobs_id_seq') AS id, g FROM generate_series(1, $2::int) g) s`;
  await pool.query(insert, [QUEUE, BACKLOG]);

  const claim = claimSql({ queue: QUEUE, maxJobs: CLAIM, leaseMs: 60_000, defaultLeaseMs: 30_000 });
  const sample = claimSql({ queue: QUEUE, maxJobs: 10, leaseMs: 60_000, defaultLeaseMs: 30_000 });
  const ack = await ackSql([{ id: '1', leaseToken: '00000000-0000-0000-0000-000000000000' }]);
  const run: Run = { claimMs: [], buffers: [], jobs: 0, seconds, vacuums: 0 };
  const until = Date.now() + seconds * 1000;

  const worker = async () => {
    const client = await pool.connect();
    try {
      while (Date.now() < until) {
        const t0 = performance.now();
        const { rows } = await client.query({
          name: 'churn_claim',
          text: claim.sql,
          values: [...claim.parameters],
        });
        run.claimMs.push(performance.now() - t0);
        if (rows.length === 0) continue;
        const input = JSON.stringify(rows.map((j) => ({ id: String(j.id), token: j.lease_token })));
        await client.query({
          name: 'churn_ack',
          text: ack.sql,
          values: [input, `[${rows.map(() => 'null').join(',')}]`],
        });
        // The producer's share: put back as many as were finished, so the backlog stays constant.
        await client.query({ name: 'churn_insert', text: insert, values: [QUEUE, rows.length] });
        run.jobs += rows.length;
      }
    } finally {
      client.release();
    }
  };
  const sampler = async () => {
    const client = await pool.connect();
    try {
      while (Date.now() < until) {
        await new Promise((r) => setTimeout(r, 1000));
        run.buffers.push((await explainClaim(client, sample.sql, [...sample.parameters], 'jobs')).buffers);
      }
    } finally {
      client.release();
    }
  };
  const leader = async () => {
    while (system === 'vacuum duty' && Date.now() < until) {
      await new Promise((r) => setTimeout(r, Math.min(TICK_MS, Math.max(0, until - Date.now()))));
      if (Date.now() >= until) break;
      if ((await vacuumLiveJobs(db, DEAD_ROWS)).outcome === 'vacuumed') run.vacuums++;
    }
  };
  await Promise.all([...Array.from({ length: workers }, worker), sampler(), leader()]);
  return run;
}

export async function sustainedChurn(ctx: BenchContext): Promise<ScenarioResult> {
  const seconds = ctx.quick ? 10 : 40;
  const workers = 4;
  const rounds = ctx.sizes.claimRounds;
  // The Baton database, migrated by the server; the server itself is not used (SQL only).
  await ctx.baton();
  const pool = new pg.Pool({
    connectionString: databaseUrl(DATABASES.baton),
    max: workers + 3,
    application_name: 'bench-churn',
  });
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
  const runs: Record<System, Run[]> = { 'vacuum duty': [], 'without the duty': [] };
  const autovacuum = await pool.query(
    `SELECT current_setting('autovacuum_naptime') AS naptime, current_setting('autovacuum') AS enabled`,
  );
  try {
    for (let round = 0; round < rounds; round++) {
      for (const system of ctx.order(round, [...SYSTEMS]) as System[]) {
        ctx.log(`  churn: ${system}, round ${round + 1}`);
        runs[system].push(await churn(pool, db, system, seconds, workers));
      }
    }
  } finally {
    await pool.query('DELETE FROM baton.jobs WHERE queue = $1', [QUEUE]).catch(() => {});
    await db.destroy();
  }

  const series = (f: (r: Run) => number): Record<string, number[]> =>
    Object.fromEntries(SYSTEMS.map((s) => [s, runs[s].map(f)]));
  const metric = (
    id: string,
    title: string,
    unit: string,
    better: 'higher' | 'lower',
    f: (r: Run) => number,
  ): Metric => ({
    id,
    title,
    unit,
    better,
    series: series(f),
    ratios: false,
  });
  const metrics = [
    metric('claim-p50', 'Claim of 50, statement latency p50', 'ms', 'lower', (r) =>
      percentile(r.claimMs, 50),
    ),
    metric('claim-p99', 'Claim of 50, statement latency p99', 'ms', 'lower', (r) =>
      percentile(r.claimMs, 99),
    ),
    metric('buffers', 'Buffers a claim of 10 touches (median of 1 s samples)', 'buffers', 'lower', (r) =>
      median(r.buffers),
    ),
    metric('buffers-max', 'Buffers a claim of 10 touches (largest sample)', 'buffers', 'lower', (r) =>
      Math.max(...r.buffers),
    ),
    metric(
      'throughput',
      'Claim 50 → ack → insert 50, four workers',
      'jobs/s',
      'higher',
      (r) => r.jobs / r.seconds,
    ),
    metric('vacuums', 'Vacuums run by the duty', 'runs', 'higher', (r) => r.vacuums),
  ];
  const med = (s: System, f: (r: Run) => number) => median(runs[s].map(f));
  const p50 = (r: Run) => percentile(r.claimMs, 50);
  return {
    id: 'sustained-churn',
    title: 'Claim cost under sustained churn: with and without the leader vacuum duty',
    setup: [
      `${workers} workers on SQL (the server's compiled statements): claim ${CLAIM} → batch ack → insert ${CLAIM} new ready jobs, for ${seconds} s per run; ready backlog held at ${BACKLOG.toLocaleString('en-US')}; ${rounds} rounds, interleaved.`,
      `vacuum duty: vacuumLiveJobs() every ${TICK_MS / 1000} s (the default tick) with the default threshold of ${DEAD_ROWS.toLocaleString('en-US')} dead rows.`,
      `without the duty: whatever the server's autovacuum does (here autovacuum = ${autovacuum.rows[0].enabled}, naptime ${autovacuum.rows[0].naptime}), with baton.jobs' per-table settings.`,
      'Buffers: EXPLAIN (ANALYZE, BUFFERS) of a claim of 10, once a second, in a transaction that is rolled back.',
    ],
    metrics,
    checks: [
      {
        target: 'claim p50 with the vacuum duty ≤ without it',
        met: med('vacuum duty', p50) <= med('without the duty', p50),
        detail: `${fmt(med('vacuum duty', p50))} vs ${fmt(med('without the duty', p50))} ms (medians of rounds)`,
      },
    ],
  };
}
