import pg from 'pg';
import { ackSql, claimSql } from '../compiled-statements.js';
import type { BenchContext } from '../context.js';
import { DATABASES, databaseUrl } from '../databases.js';
import { type Explained, explainClaim } from '../explain-claim.js';
import { createNaiveTable, NAIVE, NAIVE_FINISH_SQL, naiveClaimSql } from '../peers/naive-queue.js';
import type { Check, Metric, ScenarioResult } from '../report.js';
import { fmt, median, percentile } from '../stats.js';

/**
 * Scenario 4: claim cost stays flat. Claim latency (p50, p99) and EXPLAIN (ANALYZE, BUFFERS) of the
 * claim statement with the live table empty, with 100,000 jobs in flight (claimed, unexpired), with
 * 100,000 scheduled for the future, and with 1,000,000 finished jobs in history; and the same for the
 * naive design (bench/peers/naive-queue.ts) with the same backlogs in its single table.
 *
 * Each backlog is written straight into the tables (same queue as the measured claims, ids before
 * the ready jobs), then ANALYZEd but not vacuumed. Each burst inserts just the ready jobs it will
 * claim, then claims them one claim at a time on one connection and acks each claim at once
 * (untimed), so dead tuples and dead index entries pile up as in real churn. Bursts: Baton's claim
 * statement over SQL (prepared, as the server sends it), the naive claim over SQL, and Baton's HTTP
 * claim; interleaved, several rounds per backlog.
 */

const QUEUE = 'flat';
const TOKEN = '00000000-0000-0000-0000-000000000000';

interface Backlog {
  id: 'empty' | 'inflight' | 'scheduled' | 'history' | 'empty-again';
  label: string;
  size: (ctx: BenchContext) => number;
  baton: (n: number) => string;
  naive: (n: number) => string;
}

const BACKLOGS: Backlog[] = [
  { id: 'empty', label: 'live table empty', size: () => 0, baton: () => '', naive: () => '' },
  {
    id: 'inflight',
    label: 'jobs in flight (claimed, lease unexpired)',
    size: (c) => c.sizes.inFlightBacklog,
    baton: (n) => `
      INSERT INTO baton.jobs (slot, id, queue, state, run_at, attempts, max_attempts, lease_token, lease_ms,
                              lease_expires_at, claimed_at, payload)
      SELECT baton.job_slot(id), id, '${QUEUE}', 'claimed', now(), 1, 5, gen_random_uuid(), 3600000,
             now() + interval '1 hour', now(), jsonb_build_object('i', g)
      FROM (SELECT nextval('baton.jobs_id_seq') AS id, g FROM generate_series(1, ${n}) g) s`,
    naive: (n) => `
      INSERT INTO bench_naive.jobs (queue, lease_expires_at, lease_token, attempts, payload)
      SELECT '${QUEUE}', now() + interval '1 hour', gen_random_uuid(), 1, jsonb_build_object('i', g)
      FROM generate_series(1, ${n}) g`,
  },
  {
    id: 'scheduled',
    label: 'jobs scheduled for the future',
    size: (c) => c.sizes.scheduledBacklog,
    baton: (n) => `
      INSERT INTO baton.scheduled_jobs (id, queue, run_at, max_attempts, payload)
      SELECT nextval('baton.jobs_id_seq'), '${QUEUE}', now() + interval '1 hour', 5, jsonb_build_object('i', g)
      FROM generate_series(1, ${n}) g`,
    naive: (n) => `
      INSERT INTO bench_naive.jobs (queue, run_at, lease_expires_at, payload)
      SELECT '${QUEUE}', now() + interval '1 hour', now() + interval '1 hour', jsonb_build_object('i', g)
      FROM generate_series(1, ${n}) g`,
  },
  {
    id: 'history',
    label: 'finished jobs in history',
    size: (c) => c.sizes.historyBacklog,
    baton: (n) => `
      INSERT INTO baton.job_history (id, queue, state, priority, run_at, attempts, max_attempts,
                                     created_at, claimed_at, finished_at, payload)
      SELECT nextval('baton.jobs_id_seq'), '${QUEUE}', 'completed', 0, now(), 1, 5, now(), now(), now(),
             jsonb_build_object('i', g)
      FROM generate_series(1, ${n}) g`,
    naive: (n) => `
      INSERT INTO bench_naive.jobs (queue, lease_expires_at, attempts, payload)
      SELECT '${QUEUE}', 'infinity', 1, jsonb_build_object('i', g) FROM generate_series(1, ${n}) g`,
  },
  // The empty table once more at the end: the machine is shared, so this shows how much the load
  // drifted over the scenario; the checks compare each backlog with the mean of both empty runs.
  {
    id: 'empty-again',
    label: 'live table empty (again, at the end)',
    size: () => 0,
    baton: () => '',
    naive: () => '',
  },
];

const SERIES = ['Baton SQL', 'Baton HTTP', 'naive SQL'] as const;
type Series = (typeof SERIES)[number];

async function insertReady(admin: pg.Pool, n: number, design: 'baton' | 'naive'): Promise<void> {
  if (design === 'baton') {
    await admin.query(
      `INSERT INTO baton.jobs (slot, id, queue, state, run_at, max_attempts, payload)
       SELECT baton.job_slot(id), id, $1, 'ready', now(), 5, jsonb_build_object('i', g)
       FROM (SELECT nextval('baton.jobs_id_seq') AS id, g FROM generate_series(1, $2::int) g) s`,
      [QUEUE, n],
    );
  } else {
    await admin.query(
      `INSERT INTO bench_naive.jobs (queue, lease_expires_at, payload)
       SELECT $1, now(), jsonb_build_object('i', g) FROM generate_series(1, $2::int) g`,
      [QUEUE, n],
    );
  }
}

export async function claimCost(ctx: BenchContext): Promise<ScenarioResult> {
  const { client: http, admin } = await ctx.baton();
  const { claimSamples: samples, claimSize: size, claimRounds: rounds } = ctx.sizes;
  await createNaiveTable(admin);
  await admin.query(
    `INSERT INTO baton.queues (name, auto_created) VALUES ($1, false) ON CONFLICT (name) DO NOTHING`,
    [QUEUE],
  );
  const sqlClient = new pg.Client({
    connectionString: databaseUrl(DATABASES.baton),
    application_name: 'bench-claim',
  });
  await sqlClient.connect();
  const claim = claimSql({ queue: QUEUE, maxJobs: size, leaseMs: 60_000, defaultLeaseMs: 30_000 });
  const ack = await ackSql([{ id: '1', leaseToken: TOKEN }]);
  const naiveClaim = naiveClaimSql(size);

  const latencies: Record<string, Record<Series, number[][]>> = {};
  const plans: Record<string, { baton: Explained; naive: Explained }> = {};
  const vacuumed: Record<string, { baton: Explained; naive: Explained }> = {};

  const count = (series: Series) => (series === 'naive SQL' ? ctx.sizes.naiveClaimSamples : samples);
  const burst = async (series: Series): Promise<number[]> => {
    const out: number[] = [];
    for (let i = 0; i < count(series); i++) {
      const t0 = performance.now();
      let jobs: { id: string; lease_token: string }[];
      if (series === 'Baton HTTP') {
        const r = await http.post(`/v1/queues/${QUEUE}/claim`, { max_jobs: size, lease_ms: 60_000 });
        if (r.status !== 200) throw new Error(`claim: HTTP ${r.status}`);
        jobs = r.body.jobs;
      } else if (series === 'Baton SQL') {
        jobs = (
          await sqlClient.query({ name: 'bench_claim', text: claim.sql, values: [...claim.parameters] })
        ).rows;
      } else {
        jobs = (await sqlClient.query({ name: 'bench_naive_claim', text: naiveClaim, values: [QUEUE] })).rows;
      }
      out.push(performance.now() - t0);
      if (jobs.length !== size) throw new Error(`${series}: claimed ${jobs.length} of ${size}`);
      if (series === 'naive SQL') {
        await sqlClient.query(NAIVE_FINISH_SQL, [jobs.map((j) => j.id), jobs.map((j) => j.lease_token)]);
      } else {
        const input = JSON.stringify(jobs.map((j) => ({ id: String(j.id), token: j.lease_token })));
        const done = await sqlClient.query({
          name: 'bench_ack',
          text: ack.sql,
          values: [input, `[${jobs.map(() => 'null').join(',')}]`],
        });
        if (done.rowCount !== size) throw new Error(`ack: ${done.rowCount} of ${size}`);
      }
    }
    return out;
  };

  try {
    for (const backlog of BACKLOGS) {
      const n = backlog.size(ctx);
      ctx.log(`  claim cost: ${backlog.label}${n ? ` (${n.toLocaleString('en-US')})` : ''}`);
      await admin.query('TRUNCATE baton.jobs, baton.scheduled_jobs, baton.job_history, bench_naive.jobs');
      if (n > 0) {
        await admin.query(backlog.baton(n));
        await admin.query(backlog.naive(n));
      }
      await admin.query('ANALYZE baton.jobs, baton.scheduled_jobs, baton.job_history, bench_naive.jobs');
      const byRound: Record<Series, number[][]> = { 'Baton SQL': [], 'Baton HTTP': [], 'naive SQL': [] };
      for (let round = 0; round < rounds; round++) {
        for (const series of ctx.order(round, [...SERIES]) as Series[]) {
          await insertReady(admin, count(series) * size, series === 'naive SQL' ? 'naive' : 'baton');
          byRound[series].push(await burst(series));
        }
        // Leftover ready rows of the other design from insertReady: claim nothing more, drop them.
        await admin.query(`DELETE FROM baton.jobs WHERE queue = $1 AND state = 'ready'`, [QUEUE]);
        await admin.query(`DELETE FROM bench_naive.jobs WHERE queue = $1 AND lease_expires_at <= now()`, [
          QUEUE,
        ]);
      }
      latencies[backlog.id] = byRound;
      await insertReady(admin, size, 'baton');
      await insertReady(admin, size, 'naive');
      plans[backlog.id] = {
        baton: await explainClaim(sqlClient, claim.sql, [...claim.parameters], 'jobs'),
        naive: await explainClaim(sqlClient, naiveClaim, [QUEUE], 'jobs'),
      };
      // The same claim once VACUUM has removed the dead index entries the bursts left behind.
      await admin.query('VACUUM baton.jobs, bench_naive.jobs');
      vacuumed[backlog.id] = {
        baton: await explainClaim(sqlClient, claim.sql, [...claim.parameters], 'jobs'),
        naive: await explainClaim(sqlClient, naiveClaim, [QUEUE], 'jobs'),
      };
      const b = latencies[backlog.id]!;
      ctx.log(
        `    p50 ms: Baton SQL ${fmt(median(b['Baton SQL'].map((s) => percentile(s, 50))))}, HTTP ${fmt(median(b['Baton HTTP'].map((s) => percentile(s, 50))))}, naive ${fmt(median(b['naive SQL'].map((s) => percentile(s, 50))))}; buffers Baton ${plans[backlog.id]!.baton.buffers}, naive ${plans[backlog.id]!.naive.buffers}`,
      );
    }
  } finally {
    await sqlClient.end();
    await admin.query('TRUNCATE baton.jobs, baton.scheduled_jobs, baton.job_history');
    await admin.query('DROP SCHEMA IF EXISTS bench_naive CASCADE');
  }

  const metrics: Metric[] = BACKLOGS.map((backlog) => {
    const b = latencies[backlog.id]!;
    const series: Record<string, number[]> = {};
    for (const s of SERIES) {
      series[`${s} p50`] = b[s].map((x) => percentile(x, 50));
      series[`${s} p99`] = b[s].map((x) => percentile(x, 99));
    }
    const n = backlog.size(ctx);
    return {
      id: `claim.${backlog.id}`,
      title: `Claim of ${size}, ${n ? `${n.toLocaleString('en-US')} ` : ''}${backlog.label}`,
      unit: 'ms',
      better: 'lower',
      ratios: false,
      series,
    };
  });

  const p50 = (backlog: string, s: Series) => median(latencies[backlog]![s].map((x) => percentile(x, 50)));
  const checks: Check[] = [];
  const empty = (f: (id: string) => number) => (f('empty') + f('empty-again')) / 2;
  for (const backlog of BACKLOGS.filter((b) => b.size(ctx) > 0)) {
    for (const s of ['Baton SQL', 'Baton HTTP'] as Series[]) {
      const base = empty((id) => p50(id, s));
      const ratio = p50(backlog.id, s) / base;
      checks.push({
        target: `${s} p50 with ${backlog.label} within 1.2× of the empty table`,
        met: ratio <= 1.2,
        detail: `${fmt(p50(backlog.id, s))} vs ${fmt(base)} ms (empty, mean of first and last): ${fmt(ratio)}×`,
      });
    }
    const baseBuffers = empty((id) => plans[id]!.baton.buffers);
    const buffers = plans[backlog.id]!.baton.buffers / baseBuffers;
    checks.push({
      target: `Baton claim buffers with ${backlog.label} within 1.2× of the empty table`,
      met: buffers <= 1.2,
      detail: `${plans[backlog.id]!.baton.buffers} vs ${fmt(baseBuffers)} buffers: ${fmt(buffers)}×`,
    });
  }
  const collapse = p50('inflight', 'naive SQL') / p50('empty', 'naive SQL');
  const naiveBuffers = plans.inflight!.naive.buffers / plans.empty!.naive.buffers;
  checks.push({
    target:
      'the naive design collapses with jobs in flight (≥ 5× the buffers and ≥ 3× the p50 of its empty table)',
    met: naiveBuffers >= 5 && collapse >= 3,
    detail: `buffers ${plans.inflight!.naive.buffers} vs ${plans.empty!.naive.buffers} (${fmt(naiveBuffers)}×); p50 ${fmt(p50('inflight', 'naive SQL'))} vs ${fmt(p50('empty', 'naive SQL'))} ms (${fmt(collapse)}×)`,
  });

  const head =
    '| backlog | design | scan | rows removed by filter | shared buffers (after VACUUM) | execution ms (after VACUUM) | planning ms |';
  const notes = [
    `EXPLAIN (ANALYZE, BUFFERS) of one claim of ${size}, taken after that backlog's bursts (so with the dead tuples and dead index entries their claims and acks left), and again after a VACUUM of the table:`,
    '',
    head,
    '| --- | --- | --- | --- | --- | --- | --- |',
    ...BACKLOGS.flatMap((b) =>
      (['baton', 'naive'] as const).map((d) => {
        const e = plans[b.id]![d];
        const v = vacuumed[b.id]![d];
        return `| ${b.label} | ${d === 'baton' ? 'Baton' : NAIVE} | ${e.scan} | ${e.rowsRemovedByFilter.toLocaleString('en-US')} | ${e.buffers.toLocaleString('en-US')} (${v.buffers.toLocaleString('en-US')}) | ${fmt(e.executionMs)} (${fmt(v.executionMs)}) | ${fmt(e.planningMs)} |`;
      }),
    ),
  ];
  return {
    id: 'claim-cost',
    title: 'Scenario 4: claim cost stays flat',
    setup: [
      `Backlogs in the claimed queue: ${ctx.sizes.inFlightBacklog.toLocaleString('en-US')} in flight, ${ctx.sizes.scheduledBacklog.toLocaleString('en-US')} scheduled, ${ctx.sizes.historyBacklog.toLocaleString('en-US')} finished (Baton: baton.job_history; naive: the same table with a lease of 'infinity').`,
      `Per backlog: ${rounds} rounds × 3 bursts (Baton SQL, naive SQL, Baton HTTP), each ${samples} sequential claims of ${size} (naive: ${ctx.sizes.naiveClaimSamples}) on one connection, each claim acked at once (untimed). ANALYZE after loading the backlog, no VACUUM.`,
      'Baton SQL: the claim statement from src/jobs/claim.ts as a named prepared statement (as the server sends it). Baton HTTP: POST /v1/queues/{q}/claim round trip.',
      `Naive: ${NAIVE}: bench/peers/naive-queue.ts.`,
    ],
    metrics,
    checks,
    notes,
    details: { plans, vacuumed },
  };
}
