import { createHash } from 'node:crypto';
import http from 'node:http';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { BatonServer } from './baton-server.js';
import { DATABASES, databaseUrl, recreateDatabase } from './databases.js';
import { percentile } from './stats.js';

/**
 * Held awaits as a weapon (issue 39, findings 2 and 3): an honest tenant's latency, throughput and
 * errors, and the server's RSS, alone and beside a hostile tenant that holds awaits. One server from
 * a build (`--root`, repeatable: each checkout's `dist/`, as bench/request-cost.ts), a fresh database
 * per scenario (BENCH_DB_PREFIX names it), two keys limited to their own queues.
 *
 * The honest tenant: --workers loops, each enqueuing one job, claiming it and acking it, for
 * --seconds; every request's latency counts (p50, p99), a cycle is one enqueue + claim + ack.
 * Scenarios:
 * - `alone`: the honest tenant only.
 * - `held-1500`, `held-3000`: the hostile key holds that many `GET /v1/jobs/{own id}?wait_ms=40000`
 *   (sent 100 every 150 ms from the start; each answered or refused one is sent again a second
 *   later, so the count stays held as far as the server lets it).
 * - `large`: the hostile key holds 4 `POST /v1/jobs/await` of the same 200 jobs with 250 KB payloads
 *   (never finished: as in the issue), sent again a second after each answer.
 * RSS is sampled every 250 ms (the highest is reported). Traffic goes to 127.0.0.1 only; every loop
 * ends with --seconds.
 *
 *   npm run build
 *   BENCH_DB_PREFIX=awaits npx tsx bench/awaits-hostile.ts --root /work/before --root .
 */

const { values } = parseArgs({
  options: {
    root: { type: 'string', multiple: true, default: [] },
    seconds: { type: 'string', default: '30' },
    workers: { type: 'string', default: '8' },
    port: { type: 'string', default: '18690' },
    scenarios: { type: 'string', default: 'alone,held-1500,held-3000,large' },
    /** Extra server settings, NAME=value, repeatable (e.g. a cap raised). */
    env: { type: 'string', multiple: true, default: [] },
  },
});
const roots = values.root!.length > 0 ? values.root!.map((r) => resolve(r)) : [resolve('.')];
const SECONDS = Number(values.seconds);
const WORKERS = Number(values.workers);
const PORT = Number(values.port);
const SCENARIOS = values.scenarios!.split(',');
const EXTRA_ENV = Object.fromEntries(
  values.env!.map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
);
const DB = DATABASES.baton;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const secretOf = (name: string) => `${name}-bench-secret`;
const keyEntry = (name: string, queues: string[]) => ({
  name,
  sha256: createHash('sha256').update(secretOf(name)).digest('hex'),
  scopes: ['producer', 'consumer'],
  queues,
});

interface Answer {
  status: number;
  body: any;
}

/** One request to the server on 127.0.0.1, with its own agent's sockets. */
function request(
  agent: http.Agent,
  key: string,
  method: 'GET' | 'POST',
  path: string,
  body?: unknown,
): Promise<Answer> {
  const text = body === undefined ? undefined : JSON.stringify(body);
  return new Promise((ok, fail) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port: PORT,
        method,
        path,
        agent,
        headers: {
          authorization: `Bearer ${secretOf(key)}`,
          ...(text === undefined
            ? {}
            : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) }),
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const raw = Buffer.concat(chunks).toString();
          let parsed: unknown;
          try {
            parsed = raw ? JSON.parse(raw) : undefined;
          } catch {
            parsed = raw;
          }
          ok({ status: res.statusCode ?? 0, body: parsed });
        });
        res.on('error', fail);
      },
    );
    req.on('error', fail);
    req.end(text);
  });
}

/** Enqueue `n` jobs of `payload` into `queue` as `key`, in batches that fit the body limit. */
async function enqueue(
  agent: http.Agent,
  key: string,
  queue: string,
  n: number,
  payload: unknown,
  batch = 1000,
) {
  const ids: string[] = [];
  for (let i = 0; i < n; i += batch) {
    const jobs = Array.from({ length: Math.min(batch, n - i) }, () => ({ payload }));
    const res = await request(agent, key, 'POST', `/v1/queues/${queue}/jobs/batch`, { jobs });
    if (res.status !== 201 && res.status !== 200)
      throw new Error(`enqueue: ${res.status} ${JSON.stringify(res.body)}`);
    ids.push(...res.body.jobs.map((j: { id: string }) => j.id));
  }
  return ids;
}

interface Hostile {
  /** Requests sent and not answered yet. */
  held: () => number;
  counts: Map<number, number>;
  stop: () => Promise<void>;
}

/** Keep `ids.length` awaits held (one request per entry of `send`), re-sent a second after each answer. */
function holdAwaits(sends: (() => Promise<Answer>)[], rampEvery = 150, rampBy = 100): Hostile {
  let stopped = false;
  let held = 0;
  const counts = new Map<number, number>();
  const loops: Promise<void>[] = [];
  const loop = async (send: () => Promise<Answer>) => {
    while (!stopped) {
      held++;
      const res = await send().catch(() => ({ status: 0, body: undefined }));
      held--;
      counts.set(res.status, (counts.get(res.status) ?? 0) + 1);
      await sleep(1000);
    }
  };
  const ramp = (async () => {
    for (let i = 0; i < sends.length && !stopped; i += rampBy) {
      for (const send of sends.slice(i, i + rampBy)) loops.push(loop(send));
      await sleep(rampEvery);
    }
  })();
  return {
    held: () => held,
    counts,
    stop: async () => {
      stopped = true;
      await ramp;
      // Held requests end with their wait (at most 40 s) or when the server stops.
    },
  };
}

interface Outcome {
  latencies: number[];
  cycles: number;
  statuses: Map<number, number>;
}

/** The honest tenant: WORKERS loops of enqueue + claim + ack for SECONDS. */
async function honestLoad(): Promise<Outcome> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: WORKERS });
  const latencies: number[] = [];
  const statuses = new Map<number, number>();
  let cycles = 0;
  const timed = async (method: 'GET' | 'POST', path: string, body?: unknown) => {
    const started = performance.now();
    const res = await request(agent, 'honest', method, path, body).catch(() => ({
      status: 0,
      body: undefined,
    }));
    latencies.push(performance.now() - started);
    statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
    return res;
  };
  const end = Date.now() + SECONDS * 1000;
  await Promise.all(
    Array.from({ length: WORKERS }, async (_, w) => {
      const queue = `honest-${w}`;
      while (Date.now() < end) {
        const enq = await timed('POST', `/v1/queues/${queue}/jobs`, { payload: { n: cycles } });
        if (enq.status !== 201) continue;
        const claim = await timed('POST', `/v1/queues/${queue}/claim`, { max_jobs: 1, lease_ms: 60_000 });
        const job = claim.body?.jobs?.[0];
        if (!job) continue;
        const ack = await timed('POST', `/v1/jobs/${job.id}/ack`, {
          lease_token: job.lease_token,
          result: { ok: true },
        });
        if (ack.status === 200) cycles++;
      }
    }),
  );
  agent.destroy();
  return { latencies, cycles, statuses };
}

interface Row {
  root: string;
  scenario: string;
  p50: number;
  p99: number;
  cyclesPerSecond: number;
  honest5xx: number;
  honestOther: number;
  rssMaxMb: number;
  hostile: string;
}

async function run(root: string, scenario: string): Promise<Row> {
  await recreateDatabase(DB);
  const server = new BatonServer({
    databaseUrl: databaseUrl(DB),
    root,
    port: PORT,
    env: {
      BATON_MAINTENANCE: 'false',
      BATON_API_KEYS: JSON.stringify([keyEntry('honest', ['honest-*']), keyEntry('hostile', ['hostile-*'])]),
      ...EXTRA_ENV,
    },
  });
  await server.start();
  const setup = new http.Agent({ keepAlive: true, maxSockets: 4 });
  const held = new http.Agent({ keepAlive: false, maxSockets: Number.POSITIVE_INFINITY });
  let hostile: Hostile | undefined;
  try {
    if (scenario.startsWith('held-')) {
      const n = Number(scenario.slice('held-'.length));
      const ids = await enqueue(setup, 'hostile', 'hostile-own', n, { n: 1 });
      hostile = holdAwaits(
        ids.map((id) => () => request(held, 'hostile', 'GET', `/v1/jobs/${id}?wait_ms=40000`)),
      );
    } else if (scenario === 'large') {
      const big = 'x'.repeat(250 * 1024 - 32);
      const ids = await enqueue(setup, 'hostile', 'hostile-large', 200, { big }, 25);
      hostile = holdAwaits(
        Array.from(
          { length: 4 },
          () => () => request(held, 'hostile', 'POST', '/v1/jobs/await', { ids, wait_ms: 40_000 }),
        ),
      );
    }
    let rssMax = server.rssBytes();
    const sampler = setInterval(() => {
      rssMax = Math.max(rssMax, server.rssBytes());
    }, 250);
    const outcome = await honestLoad();
    clearInterval(sampler);
    const heldAtEnd = hostile?.held() ?? 0;
    await hostile?.stop();
    const count = (pred: (s: number) => boolean) =>
      [...outcome.statuses].filter(([s]) => pred(s)).reduce((sum, [, n]) => sum + n, 0);
    const hostileCounts = hostile ? [...hostile.counts].map(([s, n]) => `${s}×${n}`).join(' ') : '';
    return {
      root,
      scenario,
      p50: percentile(outcome.latencies, 50),
      p99: percentile(outcome.latencies, 99),
      cyclesPerSecond: outcome.cycles / SECONDS,
      honest5xx: count((s) => s >= 500 || s === 0),
      honestOther: count((s) => s >= 300 && s < 500),
      rssMaxMb: rssMax / 1024 / 1024,
      hostile: hostile ? `held at end ${heldAtEnd}; answered ${hostileCounts || 'none'}` : '',
    };
  } finally {
    await server.stop();
    setup.destroy();
    held.destroy();
  }
}

const rows: Row[] = [];
for (const root of roots) {
  for (const scenario of SCENARIOS) {
    const row = await run(root, scenario);
    rows.push(row);
    console.log(
      `${root} ${scenario}: honest p50 ${row.p50.toFixed(1)} ms, p99 ${row.p99.toFixed(1)} ms, ` +
        `${row.cyclesPerSecond.toFixed(0)} cycles/s, 5xx ${row.honest5xx}, other 4xx ${row.honestOther}, ` +
        `RSS max ${row.rssMaxMb.toFixed(0)} MB; hostile: ${row.hostile}`,
    );
  }
}
console.log(
  '\n| build | scenario | honest p50 ms | honest p99 ms | cycles/s | honest 5xx | RSS max MB | hostile |',
);
console.log('| --- | --- | --- | --- | --- | --- | --- | --- |');
for (const r of rows) {
  console.log(
    `| ${r.root} | ${r.scenario} | ${r.p50.toFixed(1)} | ${r.p99.toFixed(1)} | ${r.cyclesPerSecond.toFixed(0)} | ${r.honest5xx} | ${r.rssMaxMb.toFixed(0)} | ${r.hostile} |`,
  );
}
process.exit(0);
