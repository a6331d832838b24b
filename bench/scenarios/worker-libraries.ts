import { resolve } from 'node:path';
import { ROOT } from '../baton-server.js';
import type { BenchContext } from '../context.js';
import { CpuMeter } from '../cpu-split.js';
import { DATABASES } from '../databases.js';
import { enqueue } from '../load/baton-load.js';
import { processCpuMs } from '../process-usage.js';
import type { Metric, ScenarioResult } from '../report.js';
import { ratioCheck } from '../report.js';
import { warmUp } from '../sizes.js';
import { medianRows } from '../stats.js';
import { MeasuredWorker } from '../workers/ready-go.js';

/**
 * Worker libraries: a worker built on each library (clients/typescript, clients/python) drains a
 * backlog of no-op jobs, against the bench's own hand-written loop in the same language at the same
 * concurrency (bench/workers/loop.ts, loop.py: claim one, then ack-and-claim one per request, nothing
 * else). Each worker is a process of its own, started and loaded before the clock starts
 * (bench/workers/ready-go.ts); the run ends when the queue's last job is completed (read from
 * job_history every 25 ms). CPU per 1,000 jobs: the Baton server, PostgreSQL's backends, the worker.
 */

export const LOOP_TS = 'hand-written loop (TypeScript)';
export const LIBRARY_TS = 'TypeScript library';
export const LOOP_PY = 'hand-written loop (Python)';
export const LIBRARY_PY = 'Python library';
export const NAMED_TS = 'hand-written loop naming itself (TypeScript)';
export const NAMED_PY = 'hand-written loop naming itself (Python)';

const LOOP_TS_ARGS = ['--import', 'tsx', resolve(ROOT, 'bench/workers/loop.ts')];
const WORKERS: Record<string, { command: string; args: string[]; env?: Record<string, string> }> = {
  [LOOP_TS]: { command: process.execPath, args: LOOP_TS_ARGS },
  [NAMED_TS]: { command: process.execPath, args: LOOP_TS_ARGS, env: { LOOP_WORKER_ID: 'bench-loop-ts' } },
  [LIBRARY_TS]: { command: process.execPath, args: [resolve(ROOT, 'bench/workers/library.mjs')] },
  [LOOP_PY]: { command: 'python3', args: [resolve(ROOT, 'bench/workers/loop.py')] },
  [NAMED_PY]: {
    command: 'python3',
    args: [resolve(ROOT, 'bench/workers/loop.py')],
    env: { LOOP_WORKER_ID: 'bench-loop-py' },
  },
  [LIBRARY_PY]: { command: 'python3', args: [resolve(ROOT, 'bench/workers/library.py')] },
};

const cpuPer1000: Record<string, { server: number; postgres: number; worker: number }[]> = {};

async function run(
  ctx: BenchContext,
  system: string,
  round: number,
  n: number,
  record = true,
): Promise<number> {
  const { server, client, admin } = await ctx.baton();
  const concurrency = ctx.sizes.libraryConcurrency;
  const queue = `libraries-${round}-${system.replace(/\W+/g, '-')}`;
  await admin.query('TRUNCATE baton.job_history');
  await enqueue(client, queue, n, 100, 2);
  await admin.query('VACUUM ANALYZE');
  const { command, args, env } = WORKERS[system]!;
  const worker = await MeasuredWorker.start(command, args, {
    ...env,
    BATON_URL: server.url,
    QUEUE: queue,
    CONCURRENCY: String(concurrency),
    LEASE_MS: '60000',
  });
  const meter = new CpuMeter(admin, DATABASES.baton, () => server.cpuMs());
  try {
    const worker0 = processCpuMs(worker.pid) ?? 0;
    await meter.start();
    const t0 = performance.now();
    worker.go();
    let end = 0;
    for (;;) {
      const { rows } = await admin.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM baton.job_history WHERE queue = $1 AND state = 'completed'`,
        [queue],
      );
      if (rows[0]!.n >= n) {
        end = performance.now();
        break;
      }
      if (performance.now() - t0 > 300_000)
        throw new Error(`${system}: ${rows[0]!.n} of ${n} jobs done in 300 s`);
      await new Promise((r) => setTimeout(r, 25));
    }
    const workerCpu = (processCpuMs(worker.pid) ?? worker0) - worker0;
    const cpu = await meter.stop();
    const per = (ms: number) => (ms / n) * 1000;
    if (record) {
      cpuPer1000[system] ??= [];
      cpuPer1000[system].push({
        server: per(cpu.server),
        postgres: per(cpu.postgres),
        worker: per(workerCpu),
      });
    }
    return n / ((end - t0) / 1000);
  } finally {
    await worker.stop();
  }
}

export async function workerLibraries(ctx: BenchContext): Promise<ScenarioResult> {
  const systems = [LOOP_TS, NAMED_TS, LIBRARY_TS, LOOP_PY, NAMED_PY, LIBRARY_PY];
  const series: Record<string, number[]> = Object.fromEntries(systems.map((s) => [s, []]));
  // A fresh server's first thousands of requests run before V8 has optimised its hot path (round 1
  // of a cold run was about half as fast as round 2): warm it up, untimed, with the plain loop.
  await run(ctx, LOOP_TS, -1, warmUp(ctx.sizes.libraryJobs) * 5, false);
  for (let round = 0; round < ctx.sizes.rounds; round++) {
    for (const system of ctx.order(round, systems)) {
      const value = await run(ctx, system, round, ctx.sizes.libraryJobs);
      series[system]!.push(value);
      ctx.log(`  libraries round ${round + 1}: ${system} ${Math.round(value)} jobs/s`);
    }
  }
  const metric = (base: string, names: string[], id: string, title: string): Metric => ({
    id,
    title,
    unit: 'jobs/s',
    better: 'higher',
    series: Object.fromEntries(names.map((s) => [s, series[s]!])),
    baseline: base,
  });
  const ts = metric(
    LIBRARY_TS,
    [LIBRARY_TS, LOOP_TS, NAMED_TS],
    'libraries.typescript',
    'No-op jobs, TypeScript',
  );
  const py = metric(
    LIBRARY_PY,
    [LIBRARY_PY, LOOP_PY, NAMED_PY, LOOP_TS],
    'libraries.python',
    'No-op jobs, Python',
  );
  const s = ctx.sizes;
  const cpuRows = medianRows(cpuPer1000, ['server', 'postgres', 'worker']);
  return {
    id: 'libraries',
    title: 'Worker libraries against a hand-written loop',
    setup: [
      `${s.libraryJobs.toLocaleString('en-US')} no-op jobs per run after an untimed warm-up of the server, enqueued first (batches of 100, untimed, then VACUUM ANALYZE), ${s.rounds} rounds, interleaved; concurrency ${s.libraryConcurrency} in every worker, lease 60 s.`,
      'Each worker is one process, loaded before the clock starts; the run ends when the last job is completed (job_history read every 25 ms).',
      'Hand-written loops (bench/workers/loop.ts, loop.py): claim one, then ack with next for one (one request per job), nothing else; "naming itself": the same loop with a worker_id on its claims, as both libraries send (hostname-pid). Libraries (bench/workers/library.mjs, library.py): the library Worker with a handler that returns null (renewals, progress, logging hooks as shipped).',
    ],
    metrics: [ts, py],
    checks: [
      ratioCheck(ts, LOOP_TS, 0.9, 'TypeScript library ≥ 0.9× the hand-written TypeScript loop', LIBRARY_TS),
      ratioCheck(py, LOOP_PY, 0.9, 'Python library ≥ 0.9× the hand-written Python loop', LIBRARY_PY),
      ratioCheck(py, LOOP_TS, 0.9, 'Python library ≥ 0.9× the hand-written TypeScript loop', LIBRARY_PY),
    ],
    notes: [
      'CPU per 1,000 jobs (ms, medians of the rounds):',
      '',
      '| worker | Baton server | PostgreSQL | worker process |',
      '|---|---|---|---|',
      ...cpuRows,
    ],
  };
}
