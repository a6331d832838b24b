import type { BenchContext } from '../context.js';
import { CpuMeter, type CpuUsage } from '../cpu-split.js';
import { DATABASES } from '../databases.js';
import { enqueue, type JobOf, payloadOf } from '../load/baton-load.js';
import { GRAPHILE } from '../peers/graphile-worker.js';
import { PG_BOSS } from '../peers/pg-boss.js';
import { BATON, type Metric, ratioCheck, type ScenarioResult } from '../report.js';

/**
 * Scenario 3: enqueue only. Single-job requests from concurrent producers, and batches of 100 and
 * of 1,000, with the PostgreSQL CPU each system's backends spent per 1,000 jobs (from /proc,
 * bench/cpu-split.ts) beside the rate. Nothing consumes; between runs the bench empties each
 * system's job table (Baton: TRUNCATE; graphile-worker: TRUNCATE of its jobs table; pg-boss: a fresh
 * queue per run, deleted after), so every run starts from an empty table.
 *
 * Then Baton's batch of 100 again with each enqueue feature used by every job (a unique key, an
 * idempotency key, a group, a delay), so what each one costs is a ratio to the plain batch of the
 * same run.
 */

interface Shape {
  id: string;
  title: string;
  batch: number;
  jobs: (ctx: BenchContext) => number;
  concurrency: (ctx: BenchContext) => number;
}

const SHAPES: Shape[] = [
  {
    id: 'single',
    title: 'Single-job requests',
    batch: 1,
    jobs: (c) => c.sizes.enqueueSingleJobs,
    concurrency: (c) => c.sizes.enqueueConcurrency,
  },
  {
    id: 'batch100',
    title: 'Batches of 100',
    batch: 100,
    jobs: (c) => c.sizes.enqueueBatch100Jobs,
    concurrency: (c) => c.sizes.enqueueBatchConcurrency,
  },
  {
    id: 'batch1000',
    title: 'Batches of 1,000',
    batch: 1000,
    jobs: (c) => c.sizes.enqueueBatch1000Jobs,
    concurrency: (c) => c.sizes.enqueueBatchConcurrency,
  },
];

/** Batches of 100 in which every job uses one feature; each run's keys are its own. */
const FEATURES: { id: string; title: string; jobOf: (run: string) => JobOf }[] = [
  { id: 'plain', title: 'plain', jobOf: () => (i) => ({ payload: payloadOf(i) }) },
  {
    id: 'unique',
    title: 'unique_key',
    jobOf: (run) => (i) => ({ payload: payloadOf(i), unique_key: `${run}-${i}` }),
  },
  {
    id: 'idempotency',
    title: 'idempotency_key',
    jobOf: (run) => (i) => ({ payload: payloadOf(i), idempotency_key: `${run}-${i}` }),
  },
  {
    id: 'group',
    title: 'group (10 groups)',
    jobOf: () => (i) => ({ payload: payloadOf(i), group: `g${i % 10}` }),
  },
  {
    id: 'delay',
    title: 'delay_ms (an hour)',
    jobOf: () => (i) => ({ payload: payloadOf(i), delay_ms: 3_600_000 }),
  },
];

interface Run {
  jobsPerSecond: number;
  /** CPU ms per 1,000 jobs: PostgreSQL's backends of the system's database, and the Baton server. */
  postgresPer1000: number;
  serverPer1000: number;
}

const per1000 = (cpu: CpuUsage, jobs: number) => ({
  postgresPer1000: (cpu.postgres / jobs) * 1000,
  serverPer1000: (cpu.server / jobs) * 1000,
});

async function batonRun(ctx: BenchContext, queue: string, shape: Shape, jobOf?: JobOf): Promise<Run> {
  const { server, client, admin } = await ctx.baton();
  await admin.query(
    'TRUNCATE baton.jobs, baton.scheduled_jobs, baton.job_history, baton.unique_keys, baton.idempotency_keys',
  );
  await admin.query('VACUUM ANALYZE');
  const n = shape.jobs(ctx);
  const meter = new CpuMeter(admin, DATABASES.baton, () => server.cpuMs());
  await meter.start();
  const t0 = performance.now();
  await enqueue(client, queue, n, shape.batch, shape.concurrency(ctx), jobOf);
  const seconds = (performance.now() - t0) / 1000;
  return { jobsPerSecond: n / seconds, ...per1000(await meter.stop(), n) };
}

async function graphileRun(ctx: BenchContext, shape: Shape): Promise<Run> {
  const peer = await ctx.graphile();
  await peer.admin.query('TRUNCATE graphile_worker._private_jobs');
  await peer.admin.query('VACUUM ANALYZE');
  const n = shape.jobs(ctx);
  const meter = new CpuMeter(peer.admin, peer.database);
  await meter.start();
  const t0 = performance.now();
  await peer.enqueue(n, shape.batch, shape.concurrency(ctx));
  const seconds = (performance.now() - t0) / 1000;
  const cpu = await meter.stop();
  await peer.admin.query('TRUNCATE graphile_worker._private_jobs');
  return { jobsPerSecond: n / seconds, ...per1000(cpu, n) };
}

async function pgBossRun(ctx: BenchContext, shape: Shape): Promise<Run> {
  const peer = await ctx.pgBoss();
  await peer.newQueue();
  try {
    await peer.admin.query('VACUUM ANALYZE');
    const n = shape.jobs(ctx);
    const meter = new CpuMeter(peer.admin, peer.database);
    await meter.start();
    const t0 = performance.now();
    await peer.enqueue(n, shape.batch, shape.concurrency(ctx));
    const seconds = (performance.now() - t0) / 1000;
    return { jobsPerSecond: n / seconds, ...per1000(await meter.stop(), n) };
  } finally {
    await peer.dropQueue();
  }
}

const seriesOf = (systems: string[]) => Object.fromEntries(systems.map((s) => [s, [] as number[]]));

export async function enqueueOnly(ctx: BenchContext): Promise<ScenarioResult> {
  const systems = [BATON, GRAPHILE, PG_BOSS];
  const rate = SHAPES.map(
    (shape): Metric => ({
      id: `enqueue.${shape.id}`,
      title: `${shape.title} (${shape.jobs(ctx).toLocaleString('en-US')} jobs, ${shape.concurrency(ctx)} concurrent producers)`,
      unit: 'jobs/s',
      better: 'higher',
      series: seriesOf(systems),
    }),
  );
  const postgres = SHAPES.map(
    (shape): Metric => ({
      id: `enqueue.${shape.id}.postgres-cpu`,
      title: `${shape.title}: PostgreSQL backend CPU`,
      unit: 'CPU ms per 1,000 jobs',
      better: 'lower',
      series: seriesOf(systems),
    }),
  );
  const batch100 = SHAPES.findIndex((s) => s.id === 'batch100');
  const featureShape = SHAPES[batch100]!;
  const features = {
    rate: { id: 'enqueue.features', title: '', unit: 'jobs/s', better: 'higher', series: {} } as Metric,
    postgres: {
      id: 'enqueue.features.postgres-cpu',
      title: '',
      unit: 'CPU ms per 1,000 jobs',
      better: 'lower',
      series: {},
    } as Metric,
    server: {
      id: 'enqueue.features.server-cpu',
      title: '',
      unit: 'CPU ms per 1,000 jobs',
      better: 'lower',
      series: {},
    } as Metric,
  };
  for (const metric of Object.values(features)) {
    metric.baseline = 'plain';
    for (const f of FEATURES) metric.series[f.title === 'plain' ? 'plain' : f.title] = [];
  }
  features.rate.title = `Baton's batches of 100 with every job using one feature (${featureShape.jobs(ctx).toLocaleString('en-US')} jobs): rate`;
  features.postgres.title = "Baton's batches of 100 with one feature: PostgreSQL backend CPU";
  features.server.title = "Baton's batches of 100 with one feature: Baton server CPU";

  for (let round = 0; round < ctx.sizes.rounds; round++) {
    for (const [i, shape] of SHAPES.entries()) {
      for (const system of ctx.order(round, systems)) {
        const run =
          system === BATON
            ? await batonRun(ctx, `enqueue-${shape.id}-${round}`, shape)
            : system === GRAPHILE
              ? await graphileRun(ctx, shape)
              : await pgBossRun(ctx, shape);
        rate[i]!.series[system]!.push(run.jobsPerSecond);
        postgres[i]!.series[system]!.push(run.postgresPer1000);
        ctx.log(
          `  enqueue ${shape.id} round ${round + 1}: ${system} ${Math.round(run.jobsPerSecond)} jobs/s, ` +
            `PostgreSQL ${run.postgresPer1000.toFixed(1)} ms per 1,000`,
        );
      }
    }
    if (!ctx.includes(BATON)) continue;
    for (const feature of round % 2 === 0 ? FEATURES : [...FEATURES].reverse()) {
      const queue = `enqueue-${feature.id}-${round}`;
      const run = await batonRun(ctx, queue, featureShape, feature.jobOf(queue));
      const name = feature.title === 'plain' ? 'plain' : feature.title;
      features.rate.series[name]!.push(run.jobsPerSecond);
      features.postgres.series[name]!.push(run.postgresPer1000);
      features.server.series[name]!.push(run.serverPer1000);
      ctx.log(
        `  enqueue batch100 with ${feature.title} round ${round + 1}: ${Math.round(run.jobsPerSecond)} jobs/s, ` +
          `PostgreSQL ${run.postgresPer1000.toFixed(1)}, server ${run.serverPer1000.toFixed(1)} ms per 1,000`,
      );
    }
  }
  return {
    id: 'enqueue',
    title: 'Scenario 3: enqueue',
    setup: [
      `${ctx.sizes.rounds} rounds, interleaved; nothing consumes the jobs.`,
      'Baton: POST /v1/queues/{q}/jobs (single) and POST /v1/queues/{q}/jobs/batch; graphile-worker: addJob / addJobs; pg-boss: send / insert.',
      "PostgreSQL backend CPU: the backends connected to that system's database, from /proc (bench/cpu-split.ts).",
      'Features: the batches of 100 again on Baton alone, every job with a distinct unique_key, a distinct idempotency_key, one of 10 groups, or delay_ms of an hour (into baton.scheduled_jobs); the ratios are plain / with the feature, per round (for CPU, below 1 is what the feature costs).',
    ],
    metrics: [
      ...rate.flatMap((r, i) => [r, postgres[i]!]),
      ...(ctx.includes(BATON) ? [features.rate, features.postgres, features.server] : []),
    ],
    checks: [
      ratioCheck(rate[0]!, GRAPHILE, 1.5, "single-job enqueue ≥ 1.5× graphile-worker's addJob"),
      ratioCheck(
        postgres[batch100]!,
        GRAPHILE,
        1,
        "batch enqueue (100): PostgreSQL CPU per 1,000 jobs ≤ graphile-worker's addJobs",
      ),
      ratioCheck(rate[batch100]!, PG_BOSS, 1, "batch enqueue (100) ≥ 1× pg-boss's insert"),
      ratioCheck(rate[batch100]!, GRAPHILE, 0.8, "batch enqueue (100) ≥ 0.8× graphile-worker's addJobs"),
    ],
  };
}
