import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, openSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { untilReady } from './baton-server.js';
import { CpuMeter } from './cpu-split.js';
import { adminPool, DATABASES, databaseUrl, recreateDatabase } from './databases.js';
import { enqueue, work } from './load/baton-load.js';
import { HttpClient } from './load/http-client.js';
import { startOtlpSink } from './otlp-sink.js';
import { processCpuMs } from './process-usage.js';
import { formatSummary, newestProfile, summariseProfile } from './profile-summary.js';

/**
 * Old build against new: the Baton server's own CPU (and PostgreSQL's) per request on the hot routes,
 * for one or more builds measured in turn in the same run (A/B: rounds alternate between the builds,
 * order reversed every other round). Each build is a directory holding `dist/` (e.g. a copy of an earlier build);
 * the server starts from it as the bench starts one (compiled, LOG_LEVEL=warn, no maintenance).
 *
 *   npx tsx bench/request-cost.ts --root .scratch/base --root . --rounds 4
 *   npx tsx bench/request-cost.ts --root .scratch/base --root . --workers 1   # no group commit: steadier
 *   npx tsx bench/request-cost.ts --profile bench/results/profiles/request-cost   # V8 CPU profile
 *   npx tsx bench/request-cost.ts --root . --root .+traced   # tracing off against on
 *
 * Phases (each timed on its own, CPU from /proc of the server process):
 *   enqueue     single-job enqueue, 16 producers, one job per request
 *   ack-claim   16 workers, one job per request: ack carrying `next` (as scenario 2's ack-and-claim)
 *   nack-claim  the same with nack (retry) carrying `next`, jobs with max_attempts large
 *   batched     8 workers, claim 100 → batch ack, over a backlog enqueued first (untimed)
 *   enqueue-batch  2 producers, batches of 100
 *   cycle       2 producers (batches of 100) while 8 workers claim 100 → batch ack
 * Prints server CPU and PostgreSQL backend CPU ms per 1,000 jobs for each phase and build; medians at
 * the end. A root written `<dir>+traced` is that build with tracing on: its spans go to an OTLP sink in
 * this process (otlp-sink.ts), which answers as a collector would.
 */

const { values } = parseArgs({
  options: {
    root: { type: 'string', multiple: true, default: [] },
    jobs: { type: 'string', default: '6000' },
    'batched-jobs': { type: 'string', default: '40000' },
    rounds: { type: 'string', default: '3' },
    // Concurrent callers in every phase instead of 16 (8 batched). With 1, each request runs its
    // statements alone (no group commit), so CPU per job no longer depends on how concurrent requests
    // happened to group: the steadiest figure for comparing builds on a shared machine.
    workers: { type: 'string' },
    // Jobs per phase run untimed first (batched: five times as many).
    'warm-jobs': { type: 'string', default: '3000' },
    port: { type: 'string', default: '18640' },
    phases: { type: 'string', default: 'enqueue,ack-claim,nack-claim,batched' },
    profile: { type: 'string' },
    // Record the server with Linux perf (cpu-clock, call graphs) during the timed phases only.
    perf: { type: 'string' },
    // With --perf: record every process (perf -a), so PostgreSQL's backends show too
    // (`perf report -i <file> --comm postgres --no-children`).
    'perf-system': { type: 'boolean', default: false },
    // Extra Node options for the server (e.g. --trace-deopt), and where its stdout goes.
    'node-option': { type: 'string', multiple: true, default: [] },
    'server-stdout': { type: 'string' },
  },
});

const roots = values.root!.length > 0 ? values.root! : ['.'];
const sink = roots.some((r) => r.endsWith('+traced')) ? await startOtlpSink() : undefined;
const n = Number(values.jobs);
const nBatched = Number(values['batched-jobs']);
const warmJobs = Number(values['warm-jobs']);
const callers = values.workers === undefined ? undefined : Number(values.workers);
const port = Number(values.port);
const db = DATABASES.baton;
const url = databaseUrl(db);
const phases = values.phases!.split(',');

async function start(spec: string, profileDir?: string): Promise<ChildProcess> {
  const traced = spec.endsWith('+traced');
  const root = resolve(traced ? spec.slice(0, -'+traced'.length) : spec);
  const args = profileDir ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : [];
  if (values.perf) args.push('--perf-basic-prof-only-functions');
  args.push(...values['node-option']!);
  const stdout = values['server-stdout'] ? openSync(values['server-stdout'], 'w') : 'ignore';
  const child = spawn(process.execPath, [...args, resolve(root, 'dist/src/server.js')], {
    cwd: root,
    env: {
      ...process.env,
      DATABASE_URL: url,
      PORT: String(port),
      HOST: '127.0.0.1',
      LOG_LEVEL: 'warn',
      BATON_MAINTENANCE: 'false',
      ...(traced && sink ? { OTEL_EXPORTER_OTLP_ENDPOINT: sink.url } : {}),
    },
    stdio: ['ignore', stdout, 'inherit'],
  });
  if (!(await untilReady(`http://127.0.0.1:${port}`))) throw new Error('server not ready');
  return child;
}

function stop(child: ChildProcess): Promise<void> {
  return new Promise((ok) => {
    child.once('exit', () => ok());
    child.kill('SIGTERM');
  });
}

/** Nack with `next`, one job per request: every job is nacked once (retry at once), then acked. */
async function nackWork(client: HttpClient, queue: string, total: number, workers: number) {
  const q = encodeURIComponent(queue);
  const claim1 = { max_jobs: 1, lease_ms: 60_000, wait_ms: 200 };
  let nacked = 0;
  await Promise.all(
    Array.from({ length: workers }, async () => {
      let hand: { id: string; lease_token: string }[] = [];
      while (nacked < total) {
        if (hand.length === 0) {
          const r = await client.post(`/v1/queues/${q}/claim`, { ...claim1, wait_ms: 0 });
          if (r.status !== 200) throw new Error(`claim: ${r.status}`);
          hand = r.body.jobs;
          if (hand.length === 0) return;
          continue;
        }
        const job = hand[0]!;
        const tail = total - nacked <= workers;
        const r = await client.post(`/v1/jobs/${job.id}/nack`, {
          lease_token: job.lease_token,
          error: { message: 'bench: try again' },
          retry_in_ms: 0,
          next: tail ? { ...claim1, wait_ms: 0 } : claim1,
        });
        if (r.status !== 200) throw new Error(`nack: ${r.status} ${JSON.stringify(r.body).slice(0, 300)}`);
        nacked++;
        hand = r.body.next;
      }
    }),
  );
}

type Result = Record<string, number>;

/** System calls that read and that wrote (sockets included) so far, from /proc/<pid>/io. */
function syscalls(pid: number): number {
  const io = readFileSync(`/proc/${pid}/io`, 'utf8');
  return Number(/^syscr: (\d+)/m.exec(io)![1]) + Number(/^syscw: (\d+)/m.exec(io)![1]);
}

async function measure(root: string, round: number, profileDir?: string): Promise<Result> {
  await recreateDatabase(db);
  const child = await start(root, profileDir);
  const pid = child.pid!;
  const client = new HttpClient(`http://127.0.0.1:${port}`);
  const admin = adminPool(db);
  const out: Result = {};
  /** Transactions committed or rolled back in the bench database (each autocommit statement is one). */
  const transactions = async () => {
    const { rows } = await admin.query<{ n: string }>(
      'SELECT xact_commit + xact_rollback AS n FROM pg_stat_database WHERE datname = current_database()',
    );
    return Number(rows[0]!.n);
  };
  const untimed = async (_phase: string, _jobs: number, run: () => Promise<unknown>) => {
    await run();
  };
  const runPhase = async (
    phase: string,
    queue: string,
    jobs: number,
    batchedJobs: number,
    measured: boolean,
  ) => {
    const time = measured ? timed : untimed;
    if (phase === 'enqueue') await time(phase, jobs, () => enqueue(client, queue, jobs, 1, callers ?? 16));
    else if (phase === 'ack-claim') {
      await enqueue(client, queue, jobs, 100, 2);
      await time(phase, jobs, () =>
        work(client, queue, {
          workers: callers ?? 16,
          claimSize: 1,
          total: jobs,
          waitMs: 200,
          ackAndClaim: true,
        }),
      );
    } else if (phase === 'nack-claim') {
      await enqueue(client, queue, jobs, 100, 2);
      await time(phase, jobs, () => nackWork(client, queue, jobs, callers ?? 16));
    } else if (phase === 'enqueue-batch') {
      await time(phase, batchedJobs, () => enqueue(client, queue, batchedJobs, 100, 2));
    } else if (phase === 'cycle') {
      await time(phase, batchedJobs, () =>
        Promise.all([
          enqueue(client, queue, batchedJobs, 100, 2),
          work(client, queue, { workers: callers ?? 8, claimSize: 100, total: batchedJobs, waitMs: 200 }),
        ]),
      );
    } else if (phase === 'batched') {
      await enqueue(client, queue, batchedJobs, 100, 2);
      await time(phase, batchedJobs, () =>
        work(client, queue, { workers: callers ?? 8, claimSize: 100, total: batchedJobs, waitMs: 50 }),
      );
    } else throw new Error(`unknown phase ${phase}`);
  };
  const timed = async (phase: string, jobs: number, run: () => Promise<unknown>) => {
    await admin.query('VACUUM ANALYZE');
    const recorder = values.perf
      ? spawn(
          'perf',
          [
            'record',
            '-F',
            '1999',
            '-g',
            ...(values['perf-system'] ? ['-a'] : ['-p', String(pid)]),
            '-o',
            `${values.perf}.${phase}`,
          ],
          {
            stdio: 'ignore',
          },
        )
      : undefined;
    if (recorder) await new Promise((r) => setTimeout(r, 500));
    const xacts0 = await transactions();
    const backends = new CpuMeter(admin, db);
    await backends.start();
    const cpu0 = processCpuMs(pid)!;
    const sys0 = syscalls(pid);
    const t0 = performance.now();
    await run();
    const ms = performance.now() - t0;
    if (recorder) {
      const done = new Promise((r) => recorder.once('exit', r));
      recorder.kill('SIGINT');
      await done;
    }
    out[phase] = ((processCpuMs(pid)! - cpu0) / jobs) * 1000;
    out[`${phase} postgres`] = ((await backends.stop()).postgres / jobs) * 1000;
    out[`${phase} syscalls/job`] = (syscalls(pid) - sys0) / jobs;
    out[`${phase} jobs/s`] = jobs / (ms / 1000);
    // Backends report their counts at most once a second, when idle: wait for the last reports.
    await new Promise((r) => setTimeout(r, 1500));
    out[`${phase} transactions/job`] = ((await transactions()) - xacts0) / jobs;
  };
  try {
    // Warm up: every phase once, untimed, so the JIT has settled on every route before anything is
    // measured (otherwise optimising compilation is a tenth of the server's CPU in the timed part).
    for (const phase of phases) await runPhase(phase, `warm-${phase}`, warmJobs, warmJobs * 5, false);
    for (const phase of phases) await runPhase(phase, `${phase}-${round}`, n, nBatched, true);
  } finally {
    client.close();
    await admin.end();
    await stop(child);
  }
  return out;
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

async function main() {
  if (values.profile || values.perf) {
    const dir = values.profile ? resolve(values.profile) : undefined;
    if (dir) mkdirSync(dir, { recursive: true });
    const r = await measure(roots[0]!, 0, dir);
    console.log(JSON.stringify(r));
    const file = dir && newestProfile(dir);
    if (file) console.log(formatSummary(summariseProfile(file, 40)));
    return;
  }
  const results = new Map<string, Result[]>(roots.map((r) => [r, []]));
  for (let round = 0; round < Number(values.rounds); round++) {
    const order = round % 2 === 0 ? roots : [...roots].reverse();
    for (const root of order) {
      const r = await measure(root, round);
      results.get(root)!.push(r);
      const line = phases
        .map(
          (p) =>
            `${p} ${r[p]!.toFixed(1)} ms, PostgreSQL ${r[`${p} postgres`]!.toFixed(1)} ms (${Math.round(r[`${p} jobs/s`]!)}/s, ${r[`${p} syscalls/job`]!.toFixed(2)} syscalls/job, ${r[`${p} transactions/job`]!.toFixed(2)} transactions/job)`,
        )
        .join(', ');
      console.log(`round ${round + 1} ${root}: ${line}`);
    }
  }
  console.log('\nserver CPU / PostgreSQL backend CPU ms per 1,000 jobs, medians:');
  for (const [root, rs] of results) {
    const line = phases
      .map(
        (p) =>
          `${p} ${median(rs.map((r) => r[p]!)).toFixed(1)} / ${median(rs.map((r) => r[`${p} postgres`]!)).toFixed(1)} (${Math.round(median(rs.map((r) => r[`${p} jobs/s`]!)))}/s)`,
      )
      .join(', ');
    console.log(`${root}: ${line}`);
  }
}

await main();
await sink?.close();
