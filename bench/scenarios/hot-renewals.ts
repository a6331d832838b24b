import type pg from 'pg';
import type { BenchContext } from '../context.js';
import { waitUntil } from '../databases.js';
import { enqueue } from '../load/baton-load.js';
import type { Metric, ScenarioResult } from '../report.js';
import { fmt, median, percentile } from '../stats.js';

/**
 * Scenario 5: renewals are HOT. A set of claimed jobs is renewed over HTTP by concurrent workers for
 * a burst (after one warm-up renewal of every job, so the pages are at steady state); the HOT share
 * is the change in pg_stat_user_tables.n_tup_hot_upd over the change in n_tup_upd for baton.jobs' partitions
 * across the burst. PostgreSQL publishes table statistics asynchronously (a backend flushes them
 * when it goes idle, at most once a second), so the bench waits until the counters account for
 * every renewal it made before reading them.
 */

const QUEUE = 'renewals';

interface TableStats {
  upd: number;
  hot: number;
}

async function stats(admin: pg.Pool): Promise<TableStats> {
  const { rows } = await admin.query<{ upd: string; hot: string }>(
    // baton.jobs is partitioned (the ring): rows, and so the counters, live in its partitions.
    `SELECT coalesce(sum(n_tup_upd), 0) AS upd, coalesce(sum(n_tup_hot_upd), 0) AS hot FROM pg_stat_user_tables
     WHERE relid IN (SELECT inhrelid FROM pg_inherits WHERE inhparent = 'baton.jobs'::regclass)`,
  );
  return { upd: Number(rows[0]!.upd), hot: Number(rows[0]!.hot) };
}

/**
 * Wait until at least `updates` more updates than `from` are visible in the statistics. A backend
 * that flushed less than a second ago defers its next flush until it is idle for 10 s, unless it
 * runs another transaction after that second; so once a second, every pooled connection of the
 * server is given a trivial query (GET /readyz, many at once) to flush what it holds.
 */
async function statsAfter(admin: pg.Pool, from: TableStats, updates: number, nudge: () => Promise<void>) {
  let latest = from;
  let lastNudge = performance.now();
  await waitUntil(
    async () => {
      latest = await stats(admin);
      if (latest.upd - from.upd >= updates) return true;
      if (performance.now() - lastNudge > 1_100) {
        lastNudge = performance.now();
        await nudge();
      }
      return false;
    },
    60_000,
    100,
  );
  return latest;
}

export async function hotRenewals(ctx: BenchContext): Promise<ScenarioResult> {
  const { client, admin, server } = await ctx.baton();
  const nudge = async () => {
    await Promise.all(Array.from({ length: 30 }, () => fetch(`${server.url}/readyz`).then((r) => r.text())));
  };
  const { renewJobs: n, renewBurstMs: burstMs, renewers, claimRounds: rounds } = ctx.sizes;
  const hotShare: number[] = [];
  const rate: number[] = [];
  const p50: number[] = [];
  const p99: number[] = [];
  for (let round = 0; round < rounds; round++) {
    await admin.query('TRUNCATE baton.jobs, baton.job_history');
    const s0 = await stats(admin);
    await enqueue(client, QUEUE, n, 100, 2);
    const jobs: { id: string; lease_token: string }[] = [];
    while (jobs.length < n) {
      const r = await client.post(`/v1/queues/${QUEUE}/claim`, { max_jobs: 100, lease_ms: 120_000 });
      if (r.status !== 200 || r.body.jobs.length === 0) throw new Error(`claim: HTTP ${r.status}`);
      jobs.push(...r.body.jobs);
    }
    const renew = async (job: { id: string; lease_token: string }) => {
      const r = await client.post(`/v1/jobs/${job.id}/renew`, { lease_token: job.lease_token });
      if (r.status !== 200) throw new Error(`renew: HTTP ${r.status} ${JSON.stringify(r.body)}`);
    };
    // Warm-up: every job renewed once, so each page has already taken one round of new versions.
    let next = 0;
    await Promise.all(
      Array.from({ length: renewers }, async () => {
        while (next < jobs.length) await renew(jobs[next++]!);
      }),
    );
    // The claims and the warm-up are updates too: wait until they are all counted.
    const s1 = await statsAfter(admin, s0, 2 * n, nudge);
    let done = 0;
    const latencies: number[] = [];
    const t0 = performance.now();
    const until = t0 + burstMs;
    await Promise.all(
      Array.from({ length: renewers }, async (_, w) => {
        let i = w;
        while (performance.now() < until) {
          const t = performance.now();
          await renew(jobs[i % jobs.length]!);
          latencies.push(performance.now() - t);
          done++;
          i += renewers;
        }
      }),
    );
    const elapsed = performance.now() - t0;
    const s2 = await statsAfter(admin, s1, done, nudge);
    const share = (s2.hot - s1.hot) / (s2.upd - s1.upd);
    hotShare.push(share * 100);
    rate.push(done / (elapsed / 1000));
    p50.push(percentile(latencies, 50));
    p99.push(percentile(latencies, 99));
    ctx.log(
      `  renewals round ${round + 1}: ${done} renewals, ${s2.upd - s1.upd} updates counted, ${fmt(share * 100)}% HOT`,
    );
  }
  await admin.query('TRUNCATE baton.jobs, baton.job_history');
  const metrics: Metric[] = [
    {
      id: 'hot.share',
      title: 'HOT share of lease renewals',
      unit: '%',
      better: 'higher',
      ratios: false,
      series: { Baton: hotShare },
    },
    {
      id: 'hot.rate',
      title: 'Renewals over HTTP',
      unit: 'renewals/s',
      better: 'higher',
      ratios: false,
      series: { Baton: rate },
    },
    {
      id: 'hot.latency',
      title: 'Renew latency over HTTP',
      unit: 'ms',
      better: 'lower',
      ratios: false,
      series: { 'Baton p50': p50, 'Baton p99': p99 },
    },
  ];
  return {
    id: 'hot',
    title: 'Scenario 5: renewals are HOT',
    setup: [
      `${n.toLocaleString('en-US')} claimed jobs (lease 120 s), one warm-up renewal each, then ${renewers} HTTP workers renewing them round-robin (POST /v1/jobs/{id}/renew) for ${burstMs / 1000} s; ${rounds} rounds.`,
      'HOT share = Δ n_tup_hot_upd / Δ n_tup_upd of baton.jobs over the burst (pg_stat_user_tables), read once the counters include every renewal.',
    ],
    metrics,
    checks: [
      {
        target: 'at least 90% of renewals are HOT updates',
        met: median(hotShare) >= 90,
        detail: `${fmt(median(hotShare))}% (median; rounds ${hotShare.map((x) => fmt(x)).join(', ')})`,
      },
    ],
  };
}
