import type { BenchContext } from '../context.js';
import { enqueue } from '../load/baton-load.js';
import { GRAPHILE } from '../peers/graphile-worker.js';
import { PG_BOSS } from '../peers/pg-boss.js';
import { BATON, type Metric, ratioCheck, type ScenarioResult } from '../report.js';

/**
 * Scenario 3: enqueue only. Single-job requests from concurrent producers, and batches of 100 and
 * of 1,000. Nothing consumes; between runs the bench empties each system's job table (Baton:
 * TRUNCATE; graphile-worker: TRUNCATE of its jobs table; pg-boss: a fresh queue per run, deleted
 * after), so every run starts from an empty table.
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

async function batonRun(ctx: BenchContext, shape: Shape, round: number): Promise<number> {
  const { client, admin } = await ctx.baton();
  await admin.query('TRUNCATE baton.jobs, baton.job_history');
  await admin.query('VACUUM ANALYZE');
  const n = shape.jobs(ctx);
  const t0 = performance.now();
  await enqueue(client, `enqueue-${shape.id}-${round}`, n, shape.batch, shape.concurrency(ctx));
  return n / ((performance.now() - t0) / 1000);
}

async function graphileRun(ctx: BenchContext, shape: Shape): Promise<number> {
  const peer = await ctx.graphile();
  await peer.admin.query('TRUNCATE graphile_worker._private_jobs');
  await peer.admin.query('VACUUM ANALYZE');
  const n = shape.jobs(ctx);
  const t0 = performance.now();
  await peer.enqueue(n, shape.batch, shape.concurrency(ctx));
  const rate = n / ((performance.now() - t0) / 1000);
  await peer.admin.query('TRUNCATE graphile_worker._private_jobs');
  return rate;
}

async function pgBossRun(ctx: BenchContext, shape: Shape): Promise<number> {
  const peer = await ctx.pgBoss();
  await peer.newQueue();
  try {
    await peer.admin.query('VACUUM ANALYZE');
    const n = shape.jobs(ctx);
    const t0 = performance.now();
    await peer.enqueue(n, shape.batch, shape.concurrency(ctx));
    return n / ((performance.now() - t0) / 1000);
  } finally {
    await peer.dropQueue();
  }
}

export async function enqueueOnly(ctx: BenchContext): Promise<ScenarioResult> {
  const metrics: Metric[] = SHAPES.map((shape) => ({
    id: `enqueue.${shape.id}`,
    title: `${shape.title} (${shape.jobs(ctx).toLocaleString('en-US')} jobs, ${shape.concurrency(ctx)} concurrent producers)`,
    unit: 'jobs/s',
    better: 'higher',
    series: { [BATON]: [], [GRAPHILE]: [], [PG_BOSS]: [] },
  }));
  for (let round = 0; round < ctx.sizes.rounds; round++) {
    for (const [i, shape] of SHAPES.entries()) {
      for (const system of ctx.order(round, [BATON, GRAPHILE, PG_BOSS])) {
        const value =
          system === BATON
            ? await batonRun(ctx, shape, round)
            : system === GRAPHILE
              ? await graphileRun(ctx, shape)
              : await pgBossRun(ctx, shape);
        metrics[i]!.series[system]!.push(value);
        ctx.log(`  enqueue ${shape.id} round ${round + 1}: ${system} ${Math.round(value)} jobs/s`);
      }
    }
  }
  return {
    id: 'enqueue',
    title: 'Scenario 3: enqueue',
    setup: [
      `${ctx.sizes.rounds} rounds, interleaved; nothing consumes the jobs.`,
      'Baton: POST /v1/queues/{q}/jobs (single) and POST /v1/queues/{q}/jobs/batch; graphile-worker: addJob / addJobs; pg-boss: send / insert.',
    ],
    metrics,
    checks: [ratioCheck(metrics[0]!, GRAPHILE, 1.5, "single-job enqueue ≥ 1.5× graphile-worker's addJob")],
  };
}
