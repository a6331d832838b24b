import { parseArgs } from 'node:util';
import { BatonServer } from './baton-server.js';
import { DATABASES, databaseUrl, recreateDatabase } from './databases.js';
import { percentile } from './stats.js';

/**
 * Await-result latency: how long after an ack the request awaiting that job (GET
 * /v1/jobs/{id}?wait_ms) has its answer, with the waiter on the replica that acks and on another
 * one (woken there by the notice its own announcement asked for). Two servers from the build
 * (`npm run build` first) on a fresh database (BENCH_DB_PREFIX names it, as for every bench), the
 * default BATON_POLL_INTERVAL_MS (1 s: a wake-up that went missing would show as a second).
 *
 * Each sample, one at a time: enqueue and claim a job on replica A; send the awaiting GET to the
 * waiter's replica; give it --settle ms to read the job and announce the wait; ack on A. Measured on
 * the client's clock: from the ack's answer to the awaiting GET's answer (negative when the waiter,
 * woken in the acking process before the ack's answer was written, answers first), and from the ack
 * being sent. Also the ack's own round trip with someone awaiting the job and, in a separate pass,
 * without.
 *
 *   BENCH_DB_PREFIX=await npx tsx bench/await-latency.ts --samples 300
 */

const { values } = parseArgs({
  options: {
    samples: { type: 'string', default: '300' },
    settle: { type: 'string', default: '30' },
    port: { type: 'string', default: '18660' },
  },
});
const SAMPLES = Number(values.samples);
const SETTLE_MS = Number(values.settle);
const PORT = Number(values.port);

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function post(url: string, body: unknown): Promise<any> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  if (!res.ok) throw new Error(`POST ${url}: ${res.status} ${await res.text()}`);
  return res.json();
}

interface Sample {
  /** From the ack's answer to the awaiting GET's answer. */
  afterAck: number;
  /** From sending the ack to the awaiting GET's answer. */
  fromAckSent: number;
  /** The ack's own round trip. */
  ack: number;
}

async function claimed(url: string, queue: string) {
  const { id } = await post(`${url}/v1/queues/${queue}/jobs`, { payload: { n: 1 } });
  const claim = await post(`${url}/v1/queues/${queue}/claim`, { lease_ms: 60_000 });
  const job = claim.jobs[0];
  if (job?.id !== id) throw new Error(`claimed ${job?.id}, not ${id}`);
  return { id: id as string, token: job.lease_token as string };
}

async function sample(acker: string, waiter: string | undefined, queue: string): Promise<Sample> {
  const { id, token } = await claimed(acker, queue);
  let answeredAt = 0;
  const awaiting = waiter
    ? fetch(`${waiter}/v1/jobs/${id}?wait_ms=20000`).then(async (res) => {
        const body = (await res.json()) as { state: string };
        answeredAt = performance.now();
        return body;
      })
    : undefined;
  await sleep(SETTLE_MS);
  const sent = performance.now();
  await post(`${acker}/v1/jobs/${id}/ack`, { lease_token: token, result: { ok: true } });
  const ackedAt = performance.now();
  if (awaiting) {
    const job = await awaiting;
    if (job.state !== 'completed') throw new Error(`the awaiting GET answered ${job.state}`);
  }
  return {
    afterAck: answeredAt - ackedAt,
    fromAckSent: answeredAt - sent,
    ack: ackedAt - sent,
  };
}

const ms = (v: number) => `${v.toFixed(2)} ms`;

function report(name: string, samples: Sample[], awaited: boolean) {
  const of = (key: keyof Sample) => samples.map((s) => s[key]).sort((x, y) => x - y);
  const line = (label: string, values: number[]) =>
    `  ${label.padEnd(36)} p50 ${ms(percentile(values, 50)).padStart(10)}   p99 ${ms(percentile(values, 99)).padStart(10)}   max ${ms(values.at(-1)!).padStart(10)}`;
  console.log(`${name} (${samples.length} samples)`);
  if (awaited) {
    console.log(line('ack answered -> await answered', of('afterAck')));
    console.log(line('ack sent -> await answered', of('fromAckSent')));
    const slow = samples.filter((s) => s.fromAckSent > 500).length;
    console.log(`  answered only by the poll fallback (> 500 ms): ${slow}`);
  }
  console.log(line('ack round trip', of('ack')));
}

await recreateDatabase(DATABASES.baton);
const env = { BATON_MAINTENANCE: 'false', LOG_LEVEL: 'warn' };
const a = new BatonServer({ databaseUrl: databaseUrl(DATABASES.baton), port: PORT, env });
const b = new BatonServer({ databaseUrl: databaseUrl(DATABASES.baton), port: PORT + 1, env });
try {
  await a.start();
  await b.start();
  // Warm both servers' statement caches and connections.
  for (let i = 0; i < 30; i++) {
    await sample(a.url, a.url, 'warm');
    await sample(a.url, b.url, 'warm');
  }
  const runs: [string, string | undefined, boolean][] = [
    ['ack with nobody awaiting the job', undefined, false],
    ['waiter on the acking replica', a.url, true],
    ['waiter on another replica', b.url, true],
  ];
  for (const [name, waiter, awaited] of runs) {
    const samples: Sample[] = [];
    for (let i = 0; i < SAMPLES; i++) samples.push(await sample(a.url, waiter, 'await-latency'));
    report(name, samples, awaited);
  }
} finally {
  await Promise.all([a.stop(), b.stop()]);
}
