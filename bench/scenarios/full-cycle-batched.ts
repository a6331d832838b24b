import type { BatonServer } from '../baton-server.js';
import { BATON_PORT, type BenchContext } from '../context.js';
import { CpuMeter, type CpuUsage } from '../cpu-split.js';
import { DATABASES } from '../databases.js';
import { enqueue as enqueueJobs, type JobOf, payloadOf, work } from '../load/baton-load.js';
import { GRAPHILE, GRAPHILE_TUNED } from '../peers/graphile-worker.js';
import type { QueuePeer } from '../peers/peer.js';
import { PG_BOSS, PG_BOSS_BATCHED } from '../peers/pg-boss.js';
import { prefillCeiling, RAW_SQL, runPgbench, writeClaimAckScript } from '../peers/raw-sql.js';
import { RssSampler } from '../process-usage.js';
import {
  BATON,
  BATON_CARRYING,
  BATON_TRACED,
  type Metric,
  ratioCheck,
  type ScenarioResult,
} from '../report.js';
import { warmUp } from '../sizes.js';
import { perJob, WriteMeter, type Writes } from '../write-meter.js';
import { BATON_ACK_CLAIM } from './one-per-request.js';

/**
 * Scenario 1 (full cycle, batched) and scenario 7 (resource use, measured on the same runs).
 *
 * Processing: N jobs already enqueued (batches of 100, untimed), then W HTTP workers each loop
 * claim 100 → batch ack; jobs/s from the first claim to the last ack's response. Peers drain the
 * same N with their throughput configuration; pgbench runs Baton's own claim 100 + batch-ack
 * statements (the ceiling).
 * Full cycle: producers enqueue N in batches of 100 while the workers claim and ack (long-polling
 * when they get ahead); jobs/s from the first enqueue to the last ack, after a warm-up (warmUp).
 */

const BATCH = 100;
type Kind = 'processing' | 'cycle';

interface Run {
  jobsPerSecond: number;
  jobs: number;
  cpu: CpuUsage;
  /** CPU of a client process other than this one (pgbench), ms. */
  externalClientCpuMs?: number;
  peakRssMb?: number;
  /** Baton server RSS right after the last ack, and after IDLE_WAIT_MS of idleness (when set). */
  endRssMb?: number;
  idleRssMb?: number;
  /** What PostgreSQL wrote (BENCH_WRITES=1 only: each run then waits 22 s for the statistics). */
  writes?: Writes;
  /** Traced runs: the spans the sink received during the run (exported within a second of ending). */
  spans?: number;
}

/** BENCH_WRITES=1: measure WAL bytes and row versions written per job in every run (write-meter.ts). */
const MEASURE_WRITES = process.env.BENCH_WRITES === '1';

/**
 * BENCH_IDLE_RSS_WAIT_MS: leave the server idle this long after each Baton run and read its RSS
 * again (0, the default: not measured). Set it past the server's BATON_IDLE_MEMORY_RELEASE_MS to
 * see the heap it gives back when idle.
 */
const IDLE_WAIT_MS = Number(process.env.BENCH_IDLE_RSS_WAIT_MS ?? 0);

/** A job as a tracing producer sends it: its trace context in the job's own field (one trace per job). */
const withTrace: JobOf = (i) => ({
  payload: payloadOf(i),
  traceparent: `00-${(i + 1).toString(16).padStart(32, '0')}-${'b7ad6b7169203331'}-01`,
});

/**
 * Baton's run; with ackAndClaim each batch ack carries `next` for the next 100; traced, on the
 * server with tracing on (its spans counted, so a run shows they were sent).
 */
async function batonRun(
  ctx: BenchContext,
  round: number,
  kind: Kind,
  ackAndClaim = false,
  traces: 'none' | 'spans' | 'carried' = 'none',
): Promise<Run> {
  const traced = traces === 'spans';
  const { server, client, admin } = traced ? await ctx.batonTraced() : await ctx.baton();
  const { batchedJobs: n, batchedWorkers: workers, batchedProducers: producers } = ctx.sizes;
  const queue = `batched-${kind}-${ackAndClaim ? 'ac-' : ''}${traces === 'none' ? '' : `${traces}-`}${round}`;
  const enqueue = (q: string, total: number) =>
    enqueueJobs(client, q, total, BATCH, producers, traces === 'carried' ? withTrace : undefined);
  await admin.query('TRUNCATE baton.job_history');
  if (kind === 'processing') {
    await enqueue(queue, n);
    await admin.query('VACUUM ANALYZE');
  } else {
    const warm = warmUp(n);
    await Promise.all([
      enqueue(queue, warm),
      work(client, queue, { workers, claimSize: BATCH, total: warm, waitMs: 200 }),
    ]);
    await admin.query('VACUUM ANALYZE');
  }
  const writeMeter = MEASURE_WRITES ? new WriteMeter(admin) : undefined;
  await writeMeter?.begin();
  // The warm-up's last spans leave within a second: counted before the run, not in it.
  if (traced) await new Promise((r) => setTimeout(r, 1500));
  const spansBefore = traced ? (await ctx.batonTraced()).spans() : 0;
  const meter = new CpuMeter(admin, DATABASES.baton, () => server.cpuMs());
  const rss = new RssSampler(() => server.pid);
  await meter.start();
  rss.start();
  const t0 = performance.now();
  const producing = kind === 'cycle' ? enqueue(queue, n) : Promise.resolve();
  const lastAck = await work(client, queue, {
    workers,
    claimSize: BATCH,
    total: n,
    waitMs: kind === 'cycle' ? 200 : 50,
    ackAndClaim,
  });
  await producing;
  const cpu = await meter.stop();
  const writes = await writeMeter?.end();
  const peakRssMb = rss.stop() / 2 ** 20;
  const endRssMb = server.rssBytes() / 2 ** 20;
  let idleRssMb: number | undefined;
  if (IDLE_WAIT_MS > 0) {
    await new Promise((r) => setTimeout(r, IDLE_WAIT_MS));
    idleRssMb = server.rssBytes() / 2 ** 20;
  }
  let spans: number | undefined;
  if (traced) {
    // The last spans leave within a second (the batch processor's delay): counted once they have.
    await new Promise((r) => setTimeout(r, 1500));
    spans = (await ctx.batonTraced()).spans() - spansBefore;
  }
  return {
    jobsPerSecond: n / ((lastAck - t0) / 1000),
    jobs: n,
    cpu,
    peakRssMb,
    endRssMb,
    idleRssMb,
    writes,
    ...(spans === undefined ? {} : { spans }),
  };
}

/** A peer's run, the same for graphile-worker and pg-boss (each with its throughput configuration). */
async function peerRun<C>(ctx: BenchContext, peer: QueuePeer<C>, config: C, kind: Kind): Promise<Run> {
  const { batchedJobs: n, batchedProducers: producers } = ctx.sizes;
  return peer.withQueue(async () => {
    if ((await peer.remaining()) !== 0) throw new Error('peer: jobs left over from a previous run');
    const warm = kind === 'cycle' ? warmUp(n) : 0;
    if (kind === 'processing') {
      await peer.enqueue(n, BATCH, producers);
      await peer.admin.query('VACUUM ANALYZE');
    } else {
      await peer.startWorkers(config);
      await peer.enqueue(warm, BATCH, producers);
      await peer.waitForCompletion(warm, 300_000);
      await peer.admin.query('VACUUM ANALYZE');
    }
    const writeMeter = MEASURE_WRITES ? new WriteMeter(peer.admin) : undefined;
    await writeMeter?.begin();
    const meter = new CpuMeter(peer.admin, peer.database);
    await meter.start();
    const t0 = performance.now();
    if (kind === 'processing') await peer.startWorkers(config);
    else await peer.enqueue(n, BATCH, producers);
    const end = await peer.waitForCompletion(warm + n, 300_000);
    const cpu = await meter.stop();
    await peer.stopWorkers();
    const writes = await writeMeter?.end();
    return { jobsPerSecond: n / ((end - t0) / 1000), jobs: n, cpu, writes };
  });
}

async function ceilingRun(ctx: BenchContext, script: string): Promise<Run> {
  const { admin } = await ctx.baton();
  const clients = ctx.sizes.ceilingClients;
  const transactions = Math.max(1, Math.floor(ctx.sizes.batchedJobs / BATCH / clients));
  const jobs = transactions * clients * BATCH;
  await prefillCeiling(admin, jobs);
  await admin.query('VACUUM ANALYZE');
  const meter = new CpuMeter(admin, DATABASES.baton, () => 0, 20);
  await meter.start();
  const result = await runPgbench({
    script,
    database: DATABASES.baton,
    clients,
    threads: 2,
    transactions,
    batch: BATCH,
  });
  const cpu = await meter.stop();
  const left = await admin.query<{ n: string }>('SELECT count(*) AS n FROM baton.jobs');
  if (Number(left.rows[0]!.n) !== 0) throw new Error(`pgbench left ${left.rows[0]!.n} jobs unclaimed`);
  ceilingCommand = result.command;
  return { jobsPerSecond: result.jobsPerSecond, jobs, cpu, externalClientCpuMs: result.clientCpuMs };
}

let ceilingCommand = '';

/** A figure of Baton's runs only (both worker loops), by system. */
function batonSeries(kindRuns: Record<string, Run[]>, pick: (r: Run) => number | undefined) {
  return Object.fromEntries(
    [BATON, BATON_ACK_CLAIM, BATON_TRACED, BATON_CARRYING].map((sys) => [
      sys,
      (kindRuns[sys] ?? []).map((r) => pick(r) ?? Number.NaN),
    ]),
  );
}

function perThousand(runs: Run[], pick: (r: Run) => number): number[] {
  return runs.map((r) => (pick(r) / r.jobs) * 1000);
}

export async function fullCycleBatched(ctx: BenchContext): Promise<ScenarioResult[]> {
  const { rounds } = ctx.sizes;
  // Only when the raw-SQL ceiling runs (`--systems baton,graphile,pg-boss` leaves it out): the script
  // is generated from src/jobs, so a change there must not stop the other systems' runs.
  let script: string | undefined;
  // The raw-SQL ceiling runs the processing half only.
  const systems = [BATON, BATON_ACK_CLAIM, BATON_TRACED, BATON_CARRYING, GRAPHILE, PG_BOSS, RAW_SQL];
  const none = (list: string[]) => Object.fromEntries(list.map((sys) => [sys, [] as Run[]]));
  const runs: Record<Kind, Record<string, Run[]>> = {
    processing: none(systems),
    cycle: none(systems.filter((sys) => sys !== RAW_SQL)),
  };
  // The ring of partitions (migrations/0004) relies on the maintenance leader truncating the slots
  // ids have moved past; without it every run leaves its dead rows where the next run's claims read
  // (the measured server runs no maintenance, as in every scenario). A second Baton process leads,
  // as in the schedules scenario: its PostgreSQL work counts, its own CPU is not the server's.
  let leader: BatonServer | undefined;
  if (ctx.order(0, [BATON]).length > 0) {
    await ctx.baton();
    leader = await ctx.extraBaton(BATON_PORT + 9, { BATON_MAINTENANCE: 'true' });
  }
  try {
    await runRounds();
  } finally {
    if (leader) await ctx.stopExtra(leader);
  }
  async function runRounds() {
    for (let round = 0; round < rounds; round++) {
      for (const system of ctx.order(round, systems)) {
        for (const kind of ['processing', 'cycle'] as Kind[]) {
          let run: Run;
          if (system === BATON || system === BATON_ACK_CLAIM)
            run = await batonRun(ctx, round, kind, system === BATON_ACK_CLAIM);
          else if (system === BATON_TRACED) run = await batonRun(ctx, round, kind, false, 'spans');
          else if (system === BATON_CARRYING) run = await batonRun(ctx, round, kind, false, 'carried');
          else if (system === GRAPHILE) run = await peerRun(ctx, await ctx.graphile(), GRAPHILE_TUNED, kind);
          else if (system === PG_BOSS) run = await peerRun(ctx, await ctx.pgBoss(), PG_BOSS_BATCHED, kind);
          else if (kind === 'processing') {
            script ??= await writeClaimAckScript(BATCH);
            run = await ceilingRun(ctx, script);
          } else continue;
          runs[kind][system]!.push(run);
          ctx.log(
            `  batched ${kind} round ${round + 1}: ${system} ${Math.round(run.jobsPerSecond)} jobs/s, PostgreSQL ${(
              (run.cpu.postgres / run.jobs) * 1000
            ).toFixed(1)} ms per 1,000 jobs${run.writes ? `; ${perJob(run.writes, run.jobs)}` : ''}${
              run.spans === undefined ? '' : `; ${run.spans} spans sent`
            }`,
          );
        }
      }
    }
  }

  const throughput = (kind: Kind, title: string): Metric => ({
    id: `batched.${kind}`,
    title,
    unit: 'jobs/s',
    better: 'higher',
    series: Object.fromEntries(
      Object.entries(runs[kind]).map(([s, r]) => [s, r.map((x) => x.jobsPerSecond)]),
    ),
  });
  const processing = throughput('processing', 'Processing a backlog: claim 100 → batch ack');
  const cycle = throughput('cycle', 'Full cycle: enqueue 100/request while claiming 100 and batch-acking');

  const s = ctx.sizes;
  const batched: ScenarioResult = {
    id: 'batched',
    title: 'Scenario 1: full cycle, batched',
    setup: [
      `${s.batchedJobs.toLocaleString('en-US')} jobs per run, ${s.rounds} rounds, systems interleaved (order reversed every other round).`,
      `Baton: ${s.batchedWorkers} HTTP workers (claim max_jobs 100 → POST /v1/jobs/ack with 100 acks), ${s.batchedProducers} producers (POST .../jobs/batch, 100 jobs); server pool ${20} connections, maintenance off; a second Baton process leads maintenance at its defaults (it truncates the ring's emptied slots). Baton ack-and-claim: the same workers, each batch ack carrying next {max_jobs 100} (one request per 100 jobs; a plain claim only at the start and when an ack brought nothing).`,
      'Baton traced: the Baton loop on a second server with tracing on (OTEL_EXPORTER_OTLP_ENDPOINT to an OTLP sink in the bench process that answers 200 and counts spans; the default sampler, every span recorded): one enqueue span per 100 jobs, one claim span linking 100 jobs, one ack span per batch ack. Baton carrying traces: the Baton loop with tracing off, each job enqueued with a traceparent of its own (as a tracing producer sends it), so its jobs carry a trace context as large as those of Baton traced.',
      `graphile-worker: concurrentJobs ${GRAPHILE_TUNED.concurrency}, localQueue.size ${GRAPHILE_TUNED.localQueueSize}, completeJobBatchDelay ${GRAPHILE_TUNED.completeJobBatchDelay}, maxPoolSize ${GRAPHILE_TUNED.maxPoolSize}; producers addJobs(100) × ${s.batchedProducers}.`,
      `pg-boss: work() batchSize ${PG_BOSS_BATCHED.batchSize}, localConcurrency ${PG_BOSS_BATCHED.localConcurrency}, burstWhenBatchFull, useListenNotify + queue notify, polling 0.5 s; producers insert(100) × ${s.batchedProducers}.`,
      `Raw SQL: \`${ceilingCommand.replace(/postgres:\/\/\S+/, '<baton_bench>')}\` with bench/sql/claim-ack-100.sql (Baton's claim of 100 and batch ack, generated from src/jobs at run time).`,
    ],
    metrics: [processing, cycle],
    checks: [
      ratioCheck(processing, GRAPHILE, 1, 'processing ≥ 1× graphile-worker (tuned)'),
      ratioCheck(processing, PG_BOSS, 1.5, 'processing ≥ 1.5× pg-boss (batched)'),
      ratioCheck(processing, RAW_SQL, 0.7, 'processing ≥ 70% of the raw-SQL ceiling (claim 100 + ack 100)'),
      ratioCheck(cycle, PG_BOSS, 1, 'full cycle ≥ 1× pg-boss'),
      ratioCheck(cycle, GRAPHILE, 0.7, 'full cycle ≥ 0.7× graphile-worker'),
      ratioCheck(
        processing,
        GRAPHILE,
        0.8,
        'processing, batch ack with next (ack-and-claim) ≥ 0.8× graphile-worker (tuned)',
        BATON_ACK_CLAIM,
      ),
    ],
    details: {
      runs: Object.fromEntries(
        Object.entries(runs).map(([k, v]) => [
          k,
          Object.fromEntries(
            Object.entries(v).map(([sys, rs]) => [sys, rs.map(({ cpu, ...r }) => ({ ...r, cpu }))]),
          ),
        ]),
      ),
    },
  };

  const cpuMetric = (kind: Kind, id: string, title: string, pick: (r: Run) => number, only?: string[]) => ({
    id: `resources.${kind}.${id}`,
    title: `${title} (${kind === 'processing' ? 'processing' : 'full cycle'})`,
    unit: 'CPU ms per 1,000 jobs',
    better: 'lower' as const,
    series: Object.fromEntries(
      Object.entries(runs[kind])
        .filter(([sys]) => !only || only.includes(sys))
        .map(([sys, r]) => [sys, perThousand(r, pick)]),
    ),
  });
  const resources: ScenarioResult = {
    id: 'resources',
    title: 'Scenario 7: resource use per 1,000 jobs (on the scenario 1 runs)',
    setup: [
      "CPU from /proc: the Baton server process; the client side (Baton: the HTTP load generator in the bench process; peers: their library in the bench process; raw SQL: the pgbench process); PostgreSQL: the backends connected to that system's database (sampled every 100 ms, so backends that connect or leave mid-run count).",
      'Total = server + client + PostgreSQL backends. PostgreSQL background work (WAL writer, autovacuum) and other users of the machine are not in it.',
      "PostgreSQL server CPU, whole server: the postmaster's utime+stime+cutime+cstime (cutime keeps the CPU of backends that exited) plus every live child's utime+stime, from /proc, before and after each timed run (bench/postgres-cpu.ts). It includes the WAL writer, checkpointer and autovacuum, and also other users of the same server, so compare it on a quiet machine.",
      'Server RSS: largest resident set of the Baton server process during the run (sampled every 100 ms), and the resident set right after the last ack (with BENCH_IDLE_RSS_WAIT_MS, also that long after it, idle).',
    ],
    metrics: (['processing', 'cycle'] as Kind[]).flatMap((kind) => [
      cpuMetric(
        kind,
        'total',
        'Total CPU',
        (r) => r.cpu.server + (r.externalClientCpuMs ?? r.cpu.bench) + r.cpu.postgres,
      ),
      cpuMetric(kind, 'server', 'Baton server CPU', (r) => r.cpu.server, [
        BATON,
        BATON_ACK_CLAIM,
        BATON_TRACED,
        BATON_CARRYING,
      ]),
      cpuMetric(kind, 'client', 'Client-side CPU', (r) => r.externalClientCpuMs ?? r.cpu.bench),
      cpuMetric(kind, 'postgres', 'PostgreSQL backend CPU', (r) => r.cpu.postgres),
      cpuMetric(
        kind,
        'postgres-server',
        'PostgreSQL server CPU, whole server from /proc',
        (r) => r.cpu.postgresServer,
      ),
      {
        id: `resources.${kind}.rss`,
        title: `Baton server peak RSS (${kind === 'processing' ? 'processing' : 'full cycle'})`,
        unit: 'MiB',
        better: 'lower' as const,
        series: batonSeries(runs[kind], (r) => r.peakRssMb),
      },
      {
        id: `resources.${kind}.rss-end`,
        title: `Baton server RSS at the last ack (${kind === 'processing' ? 'processing' : 'full cycle'})`,
        unit: 'MiB',
        better: 'lower' as const,
        series: batonSeries(runs[kind], (r) => r.endRssMb),
      },
      ...(IDLE_WAIT_MS > 0
        ? [
            {
              id: `resources.${kind}.rss-idle`,
              title: `Baton server RSS ${IDLE_WAIT_MS / 1000} s after the last ack (${kind === 'processing' ? 'processing' : 'full cycle'})`,
              unit: 'MiB',
              better: 'lower' as const,
              series: batonSeries(runs[kind], (r) => r.idleRssMb),
            },
          ]
        : []),
    ]),
    checks: [],
  };
  return [batched, resources];
}
