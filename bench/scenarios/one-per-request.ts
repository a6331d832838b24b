import type { BenchContext } from '../context.js';
import { CpuMeter, type CpuUsage } from '../cpu-split.js';
import { DATABASES } from '../databases.js';
import { enqueue, work } from '../load/baton-load.js';
import { GRAPHILE, GRAPHILE_SINGLE_16 } from '../peers/graphile-worker.js';
import type { QueuePeer } from '../peers/peer.js';
import { PG_BOSS, PG_BOSS_SINGLE_16 } from '../peers/pg-boss.js';
import { BATON, BATON_TRACED, type Metric, ratioCheck, type ScenarioResult } from '../report.js';
import { warmUp } from '../sizes.js';
import { medianRows } from '../stats.js';

/**
 * Scenario 2: one job per request. Full cycle: producers enqueue one job per request while workers
 * each loop claim 1 → ack 1 (long-polling when the queue is empty); jobs/s from the first enqueue to
 * the last ack, after the same warm-up and ANALYZE as scenario 1's full cycle. Processing: the same
 * workers drain jobs enqueued beforehand (untimed, then VACUUM ANALYZE). Baton runs twice: claim →
 * ack (two requests per job), and ack-and-claim (each ack carries `next` for one job, so a
 * busy worker makes one request per job). Peers: graphile-worker at concurrency 16 fetching and
 * completing one job at a time (no local queue, no batched completion), pg-boss with batchSize 1 and
 * 16 local workers.
 */

export const BATON_ACK_CLAIM = 'Baton ack-and-claim';

type Kind = 'cycle' | 'processing';

/**
 * CPU per 1,000 jobs of each processing run, by system: the Baton server, PostgreSQL backends, and
 * this process (Baton's load generator, or the peer library working in-process).
 */
const cpuPer1000: Record<string, { server: number; postgres: number; client: number }[]> = {};

function recordCpu(system: string, cpu: CpuUsage, jobs: number): void {
  const per = (ms: number) => (ms / jobs) * 1000;
  cpuPer1000[system] ??= [];
  cpuPer1000[system].push({ server: per(cpu.server), postgres: per(cpu.postgres), client: per(cpu.bench) });
}

/** Baton's run; traced, the plain claim → ack loop on the server with tracing on (three spans a job). */
async function batonRun(
  ctx: BenchContext,
  round: number,
  kind: Kind,
  ackAndClaim: boolean,
  traced = false,
): Promise<number> {
  const { server, client, admin } = traced ? await ctx.batonTraced() : await ctx.baton();
  const { singleJobs: n, singleWorkers: workers, singleProducers: producers } = ctx.sizes;
  const queue = `single-${kind}-${ackAndClaim ? 'ac' : traced ? 'traced' : 'plain'}-${round}`;
  const opts = { workers, claimSize: 1, waitMs: 200, ackAndClaim };
  await admin.query('TRUNCATE baton.job_history');
  if (kind === 'processing') {
    await enqueue(client, queue, n, 100, producers);
    await admin.query('VACUUM ANALYZE');
    const meter = new CpuMeter(admin, DATABASES.baton, () => server.cpuMs());
    await meter.start();
    const t0 = performance.now();
    const lastAck = await work(client, queue, { ...opts, total: n });
    const cpu = await meter.stop();
    recordCpu(ackAndClaim ? BATON_ACK_CLAIM : traced ? BATON_TRACED : BATON, cpu, n);
    return n / ((lastAck - t0) / 1000);
  }
  const warm = warmUp(n);
  await Promise.all([
    enqueue(client, queue, warm, 1, producers),
    work(client, queue, { ...opts, total: warm }),
  ]);
  await admin.query('VACUUM ANALYZE');
  const t0 = performance.now();
  const producing = enqueue(client, queue, n, 1, producers);
  const lastAck = await work(client, queue, { ...opts, total: n });
  await producing;
  return n / ((lastAck - t0) / 1000);
}

/** A peer's run: the same warm-up (full cycle), ANALYZE and timed drain as Baton's. */
async function peerRun<C>(
  ctx: BenchContext,
  name: string,
  peer: QueuePeer<C>,
  config: C,
  kind: Kind,
): Promise<number> {
  const { singleJobs: n, singleProducers: producers } = ctx.sizes;
  return peer.withQueue(async () => {
    if (kind === 'processing') {
      await peer.enqueue(n, 100, producers);
      await peer.admin.query('VACUUM ANALYZE');
      const meter = new CpuMeter(peer.admin, peer.database);
      await meter.start();
      const t0 = performance.now();
      await peer.startWorkers(config);
      const end = await peer.waitForCompletion(n, 300_000);
      const cpu = await meter.stop();
      await peer.stopWorkers();
      recordCpu(name, cpu, n);
      return n / ((end - t0) / 1000);
    }
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
  const systems = [BATON_ACK_CLAIM, BATON, BATON_TRACED, GRAPHILE, PG_BOSS];
  const empty = () => Object.fromEntries(systems.map((s) => [s, [] as number[]]));
  const series: Record<Kind, Record<string, number[]>> = {
    cycle: empty(),
    processing: Object.fromEntries(systems.filter((s) => s !== PG_BOSS).map((s) => [s, [] as number[]])),
  };
  for (let round = 0; round < ctx.sizes.rounds; round++) {
    for (const kind of ['cycle', 'processing'] as Kind[]) {
      // pg-boss with batchSize 1 drains a backlog at one job per worker per polling interval
      // (about 32 jobs/s here): it says nothing about one job per request, and takes minutes a round.
      const measured = kind === 'processing' ? systems.filter((s) => s !== PG_BOSS) : systems;
      for (const system of ctx.order(round, measured)) {
        const value =
          system === BATON || system === BATON_ACK_CLAIM || system === BATON_TRACED
            ? await batonRun(ctx, round, kind, system === BATON_ACK_CLAIM, system === BATON_TRACED)
            : system === GRAPHILE
              ? await peerRun(ctx, GRAPHILE, await ctx.graphile(), GRAPHILE_SINGLE_16, kind)
              : await peerRun(ctx, PG_BOSS, await ctx.pgBoss(), PG_BOSS_SINGLE_16, kind);
        series[kind][system]!.push(value);
        ctx.log(`  one-per-request ${kind} round ${round + 1}: ${system} ${Math.round(value)} jobs/s`);
      }
    }
  }
  const metric = (kind: Kind, id: string, title: string): Metric => ({
    id,
    title,
    unit: 'jobs/s',
    better: 'higher',
    series: series[kind],
    baseline: BATON_ACK_CLAIM,
  });
  const cycle = metric('cycle', 'single.cycle', 'Full cycle, one job per request');
  const processing = metric('processing', 'single.processing', 'Processing a backlog, one job per request');
  const s = ctx.sizes;
  const cpuRows = medianRows(cpuPer1000, ['server', 'postgres', 'client']);
  return {
    id: 'single',
    title: 'Scenario 2: one job per request',
    setup: [
      `${s.singleJobs.toLocaleString('en-US')} jobs per run, ${s.rounds} rounds, interleaved. Full cycle: ${s.singleProducers} producers enqueue one job per request while the workers run. Processing: the jobs are enqueued first (batches of 100, untimed), then VACUUM ANALYZE, then the workers drain them.`,
      `Baton: ${s.singleWorkers} HTTP workers, each claim max_jobs 1 (wait_ms 200) → POST /v1/jobs/{id}/ack; producers POST /v1/queues/{q}/jobs, one job per request.`,
      `Baton ack-and-claim: the same ${s.singleWorkers} workers, each ack carrying next {max_jobs 1, wait_ms 200} (one request per job; wait_ms 0 within the last ${s.singleWorkers} jobs, so no ack waits for jobs that will never come); a plain claim only at the start and when an ack brought no job. Ratios are Baton ack-and-claim / each other row.`,
      'Baton traced: the claim → ack loop on a second server with tracing on (spans to an OTLP sink in the bench process; every span recorded): an enqueue, a claim and an ack span per job.',
      `graphile-worker: concurrentJobs ${GRAPHILE_SINGLE_16.concurrency}, no local queue, no batched completion, maxPoolSize ${GRAPHILE_SINGLE_16.maxPoolSize}; ${s.singleProducers} producers addJob() (processing: addJobs() of 100).`,
      `pg-boss: work() batchSize ${PG_BOSS_SINGLE_16.batchSize}, localConcurrency ${PG_BOSS_SINGLE_16.localConcurrency}, useListenNotify + queue notify, polling 0.5 s; ${s.singleProducers} producers send(). Not in the processing runs: with batchSize 1 it drains a backlog at one job per worker per 0.5 s poll (about 32 jobs/s in a trial run).`,
    ],
    metrics: [cycle, processing],
    notes: cpuRows.length
      ? [
          '**CPU per 1,000 jobs, processing runs** (ms, medians over rounds; from /proc. The bench process is Baton’s HTTP load generator, or graphile-worker itself, in-process)',
          '',
          '| system | Baton server | PostgreSQL backends | bench process |',
          '| --- | --- | --- | --- |',
          ...cpuRows,
        ]
      : undefined,
    details: { cpuPer1000 },
    checks: [
      ratioCheck(
        processing,
        GRAPHILE,
        1,
        'processing, ack-and-claim ≥ 1× graphile-worker at concurrency 16',
        BATON_ACK_CLAIM,
      ),
      ratioCheck(
        cycle,
        GRAPHILE,
        1,
        'full cycle, ack-and-claim ≥ 1× graphile-worker at concurrency 16',
        BATON_ACK_CLAIM,
      ),
      ratioCheck(cycle, GRAPHILE, 1, 'full cycle, claim → ack ≥ 1× graphile-worker at concurrency 16'),
      ratioCheck(cycle, PG_BOSS, 2, 'full cycle, claim → ack ≥ 2× pg-boss with batch size 1'),
    ],
  };
}
