import type { BenchContext } from '../context.js';
import { enqueue, work } from '../load/baton-load.js';
import { GRAPHILE, GRAPHILE_SINGLE_16 } from '../peers/graphile-worker.js';
import type { QueuePeer } from '../peers/peer.js';
import { PG_BOSS, PG_BOSS_SINGLE_16 } from '../peers/pg-boss.js';
import { BATON, type Metric, ratioCheck, type ScenarioResult } from '../report.js';
import { warmUp } from '../sizes.js';

/**
 * Scenario 2: full cycle, one job per request. Producers enqueue one job per request while workers
 * each loop claim 1 → ack 1 (long-polling when the queue is empty); jobs/s from the first enqueue to
 * the last ack, after the same warm-up and ANALYZE as scenario 1's full cycle. Peers: graphile-worker at concurrency 16 fetching and completing one job at a
 * time (no local queue, no batched completion), pg-boss with batchSize 1 and 16 local workers.
 */

async function batonRun(ctx: BenchContext, round: number): Promise<number> {
  const { client, admin } = await ctx.baton();
  const { singleJobs: n, singleWorkers: workers, singleProducers: producers } = ctx.sizes;
  const queue = `single-${round}`;
  await admin.query('TRUNCATE baton.job_history');
  const warm = warmUp(n);
  await Promise.all([
    enqueue(client, queue, warm, 1, producers),
    work(client, queue, { workers, claimSize: 1, total: warm, waitMs: 200 }),
  ]);
  await admin.query('VACUUM ANALYZE');
  const t0 = performance.now();
  const producing = enqueue(client, queue, n, 1, producers);
  const lastAck = await work(client, queue, { workers, claimSize: 1, total: n, waitMs: 200 });
  await producing;
  return n / ((lastAck - t0) / 1000);
}

/** A peer's run: the same warm-up, ANALYZE and timed drain for graphile-worker and pg-boss. */
async function peerRun<C>(ctx: BenchContext, peer: QueuePeer<C>, config: C): Promise<number> {
  const { singleJobs: n, singleProducers: producers } = ctx.sizes;
  return peer.withQueue(async () => {
    const warm = warmUp(n);
    await peer.startWorkers(config);
    await peer.enqueue(warm, 1, producers);
    await peer.waitForCompletion(warm, 300_000);
    await peer.admin.query('VACUUM ANALYZE');
    const t0 = performance.now();
    await peer.enqueue(n, 1, producers);
    const end = await peer.waitForCompletion(warm + n, 300_000);
    await peer.stopWorkers();
    return n / ((end - t0) / 1000);
  });
}

export async function onePerRequest(ctx: BenchContext): Promise<ScenarioResult> {
  const series: Record<string, number[]> = { [BATON]: [], [GRAPHILE]: [], [PG_BOSS]: [] };
  for (let round = 0; round < ctx.sizes.rounds; round++) {
    for (const system of ctx.order(round, [BATON, GRAPHILE, PG_BOSS])) {
      const value =
        system === BATON
          ? await batonRun(ctx, round)
          : system === GRAPHILE
            ? await peerRun(ctx, await ctx.graphile(), GRAPHILE_SINGLE_16)
            : await peerRun(ctx, await ctx.pgBoss(), PG_BOSS_SINGLE_16);
      series[system]!.push(value);
      ctx.log(`  one-per-request round ${round + 1}: ${system} ${Math.round(value)} jobs/s`);
    }
  }
  const metric: Metric = {
    id: 'single.cycle',
    title: 'Full cycle, one job per request',
    unit: 'jobs/s',
    better: 'higher',
    series,
  };
  const s = ctx.sizes;
  return {
    id: 'single',
    title: 'Scenario 2: full cycle, one job per request',
    setup: [
      `${s.singleJobs.toLocaleString('en-US')} jobs per run, ${s.rounds} rounds, interleaved.`,
      `Baton: ${s.singleWorkers} HTTP workers, each claim max_jobs 1 (wait_ms 200) → POST /v1/jobs/{id}/ack; ${s.singleProducers} producers POST /v1/queues/{q}/jobs, one job per request.`,
      `graphile-worker: concurrentJobs ${GRAPHILE_SINGLE_16.concurrency}, no local queue, no batched completion, maxPoolSize ${GRAPHILE_SINGLE_16.maxPoolSize}; ${s.singleProducers} producers addJob().`,
      `pg-boss: work() batchSize ${PG_BOSS_SINGLE_16.batchSize}, localConcurrency ${PG_BOSS_SINGLE_16.localConcurrency}, useListenNotify + queue notify, polling 0.5 s; ${s.singleProducers} producers send().`,
    ],
    metrics: [metric],
    checks: [
      ratioCheck(metric, GRAPHILE, 1, '≥ 1× graphile-worker at concurrency 16'),
      ratioCheck(metric, PG_BOSS, 2, '≥ 2× pg-boss with batch size 1'),
    ],
  };
}
