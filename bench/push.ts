import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { parseArgs } from 'node:util';
import { BatonServer } from './baton-server.js';
import { adminPool, DATABASES, databaseUrl, recreateDatabase } from './databases.js';
import { PostgresCpu } from './postgres-cpu.js';
import { median, percentile } from './stats.js';

/**
 * Push against pull at equal concurrency (docs/push.md, docs/benchmarks.md): one Baton from the build
 * (`npm run build` first) on a fresh database. Pull: `--concurrency` workers in this process, each
 * claiming one job and acking it with the next claim in the same request (the cheapest pull loop).
 * Push: the queue's push concurrency set to the same number, to a receiver in this process that
 * answers 204 at once. Each round drains a backlog of `--jobs` (throughput, Baton's and PostgreSQL's
 * CPU per 1,000 jobs), then offers `--rate` jobs a second for `--latency-seconds` to an empty queue
 * (delivery latency from the enqueue's answer to the job's arrival, on this process's clock).
 * Rounds alternate, pull first; the ratios are per round, then their median.
 *
 *   npm run build && npx tsx bench/push.ts --rounds 3
 */

const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '3' },
    jobs: { type: 'string', default: '20000' },
    concurrency: { type: 'string', default: '16' },
    rate: { type: 'string', default: '200' },
    'latency-seconds': { type: 'string', default: '10' },
    port: { type: 'string', default: '18690' },
  },
});
const ROUNDS = Number(values.rounds);
const JOBS = Number(values.jobs);
const CONCURRENCY = Number(values.concurrency);
const RATE = Number(values.rate);
const LATENCY_S = Number(values['latency-seconds']);

async function call(url: string, method: string, body?: unknown): Promise<any> {
  const res = await fetch(url, {
    method,
    ...(body === undefined
      ? {}
      : { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }),
  });
  if (!res.ok) throw new Error(`${method} ${url}: ${res.status} ${await res.text()}`);
  return res.json();
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Where arrivals are reported: every job's payload carries its enqueue time (`t`). */
type Arrival = (payload: { t?: number }) => void;

async function enqueueBacklog(base: string, queue: string) {
  for (let i = 0; i < JOBS; i += 1000) {
    const jobs = Array.from({ length: Math.min(1000, JOBS - i) }, () => ({ payload: {} }));
    await call(`${base}/v1/queues/${queue}/jobs/batch`, 'POST', { jobs });
  }
}

/** Offer RATE jobs a second for LATENCY_S seconds; resolves once all have arrived. */
async function offer(base: string, queue: string, arrivals: { count: number }) {
  const total = RATE * LATENCY_S;
  const start = Date.now();
  for (let i = 0; i < total; i++) {
    const due = start + (i * 1000) / RATE;
    if (due > Date.now()) await sleep(due - Date.now());
    call(`${base}/v1/queues/${queue}/jobs`, 'POST', { payload: { t: Date.now() } }).catch((err) =>
      console.error(err),
    );
  }
  while (arrivals.count < total) await sleep(20);
}

interface RoundResult {
  jobsPerSecond: number;
  serverCpuPer1000: number;
  pgCpuPer1000: number;
  latencies: number[];
}

async function measure(
  server: BatonServer,
  pg: PostgresCpu,
  queue: string,
  run: (onArrival: Arrival) => { stop: () => Promise<void>; done: Promise<void> },
): Promise<RoundResult> {
  await enqueueBacklog(server.url, queue);
  let count = 0;
  let drained: () => void = () => {};
  const backlogDone = new Promise<void>((r) => (drained = r));
  const latencies: number[] = [];
  let timing = false;
  const arrivals = { count: 0 };
  const onArrival: Arrival = (payload) => {
    if (timing) {
      if (payload.t !== undefined) latencies.push(Date.now() - payload.t);
      arrivals.count++;
      return;
    }
    if (++count === JOBS) drained();
  };
  const cpu0 = server.cpuMs();
  pg.start();
  const t0 = performance.now();
  const runner = run(onArrival);
  await backlogDone;
  const seconds = (performance.now() - t0) / 1000;
  const serverCpu = server.cpuMs() - cpu0;
  const pgCpu = pg.read();
  timing = true;
  await offer(server.url, queue, arrivals);
  await runner.stop();
  return {
    jobsPerSecond: JOBS / seconds,
    serverCpuPer1000: (serverCpu / JOBS) * 1000,
    pgCpuPer1000: (pgCpu / JOBS) * 1000,
    latencies,
  };
}

/** CONCURRENCY pull workers: claim one, then ack it asking for the next, until stopped. */
function pullWorkers(base: string, queue: string) {
  return (onArrival: Arrival) => {
    let stopped = false;
    const worker = async () => {
      let job: any;
      while (!stopped) {
        if (!job) {
          const claimed = await call(`${base}/v1/queues/${queue}/claim`, 'POST', {
            max_jobs: 1,
            wait_ms: 1000,
          });
          job = claimed.jobs[0];
          continue;
        }
        onArrival(job.payload);
        const acked = await call(`${base}/v1/jobs/${job.id}/ack`, 'POST', {
          lease_token: job.lease_token,
          ...(stopped ? {} : { next: { max_jobs: 1, wait_ms: 1000 } }),
        });
        job = acked.next?.[0];
      }
    };
    const all = Promise.all(Array.from({ length: CONCURRENCY }, worker));
    return {
      done: all.then(() => {}),
      stop: async () => {
        stopped = true;
        await all;
      },
    };
  };
}

/** A receiver answering 204 at once; push concurrency CONCURRENCY. */
function pushReceiver(base: string, queue: string, receiver: { onArrival: Arrival; url: string }) {
  return (onArrival: Arrival) => {
    receiver.onArrival = onArrival;
    const set = call(`${base}/v1/queues/${queue}/push`, 'PUT', {
      url: receiver.url,
      concurrency: CONCURRENCY,
    });
    return {
      done: set.then(() => {}),
      stop: async () => {
        await set;
        await call(`${base}/v1/queues/${queue}/push`, 'DELETE');
      },
    };
  };
}

await recreateDatabase(DATABASES.baton);
const receiver = { onArrival: (() => {}) as Arrival, url: '' };
const sink = http.createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    res.writeHead(204);
    res.end();
    receiver.onArrival(JSON.parse(Buffer.concat(chunks).toString('utf8')));
  });
});
await new Promise<void>((r) => sink.listen(0, '127.0.0.1', r));
receiver.url = `http://127.0.0.1:${(sink.address() as AddressInfo).port}/jobs`;

const server = new BatonServer({
  databaseUrl: databaseUrl(DATABASES.baton),
  port: Number(values.port),
  env: { BATON_PUSH_ALLOW: '127.0.0.1', LOG_LEVEL: 'warn' },
});
const pool = adminPool(DATABASES.baton);
const results: Record<'pull' | 'push', RoundResult[]> = { pull: [], push: [] };
try {
  await server.start();
  const pg = await PostgresCpu.of(pool);
  for (let round = 1; round <= ROUNDS; round++) {
    const pullQueue = `bench-pull-${round}`;
    const pushQueue = `bench-push-${round}`;
    results.pull.push(await measure(server, pg, pullQueue, pullWorkers(server.url, pullQueue)));
    results.push.push(await measure(server, pg, pushQueue, pushReceiver(server.url, pushQueue, receiver)));
    const [a, b] = [results.pull.at(-1)!, results.push.at(-1)!];
    console.log(
      `round ${round}: pull ${a.jobsPerSecond.toFixed(0)}/s, push ${b.jobsPerSecond.toFixed(0)}/s ` +
        `(${(b.jobsPerSecond / a.jobsPerSecond).toFixed(2)}x)`,
    );
  }
} finally {
  await server.stop();
  await pool.end();
  sink.close();
}

const med = (kind: 'pull' | 'push', f: (r: RoundResult) => number) => median(results[kind].map(f));
const lat = (kind: 'pull' | 'push', p: number) =>
  percentile(
    results[kind].flatMap((r) => r.latencies).sort((x, y) => x - y),
    p,
  );
const ratio = median(results.push.map((r, i) => r.jobsPerSecond / results.pull[i]!.jobsPerSecond));
console.log(`\npush vs pull at concurrency ${CONCURRENCY}, ${JOBS} jobs a round, ${ROUNDS} rounds (medians)`);
console.log(
  '| | jobs/s | Baton CPU ms / 1,000 jobs | PostgreSQL CPU ms / 1,000 jobs | latency p50 | latency p99 |',
);
console.log('|---|---|---|---|---|---|');
for (const kind of ['pull', 'push'] as const) {
  console.log(
    `| ${kind} | ${med(kind, (r) => r.jobsPerSecond).toFixed(0)} | ${med(kind, (r) => r.serverCpuPer1000).toFixed(0)} | ` +
      `${med(kind, (r) => r.pgCpuPer1000).toFixed(0)} | ${lat(kind, 50).toFixed(1)} ms | ${lat(kind, 99).toFixed(1)} ms |`,
  );
}
console.log(`push / pull throughput, median of per-round ratios: ${ratio.toFixed(2)}x (target >= 0.8x)`);
