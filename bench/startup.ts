import { type ChildProcess, spawn } from 'node:child_process';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { DATABASES, databaseUrl, recreateDatabase } from './databases.js';
import { HttpClient } from './load/http-client.js';
import { percentile } from './stats.js';

/**
 * How fast a server is ready, and how it serves a burst that waited for it: each start command in
 * turn, rounds alternated, on a database whose schema is current and which holds a backlog.
 *
 *   npx tsx bench/startup.ts                     # bundle (npm run start:dist), compiled, tsx (npm start)
 *   npx tsx bench/startup.ts --starts bundle --rounds 5 --workers 32 --jobs 20000
 *
 * Per start: the time from spawn to the first /readyz 200; then `--workers` workers that were
 * already trying to claim (claim 10, batch ack, again) before the server listened: claim latency
 * p50/p99 in each of the first five seconds, and the time until the backlog is worked off. Needs
 * `npm run build` first (the bundle and the compiled server come from dist/).
 */

const { values } = parseArgs({
  options: {
    starts: { type: 'string', default: 'bundle,compiled,tsx' },
    rounds: { type: 'string', default: '3' },
    workers: { type: 'string', default: '32' },
    jobs: { type: 'string', default: '20000' },
    port: { type: 'string', default: '18660' },
  },
});

const ROOT = resolve(import.meta.dirname, '..');
const START_COMMANDS: Record<string, string[]> = {
  bundle: ['dist/baton.mjs'],
  compiled: ['dist/src/server.js'],
  tsx: ['--import', 'tsx', 'src/server.ts'],
};
const starts = values.starts!.split(',');
for (const s of starts) if (!START_COMMANDS[s]) throw new Error(`unknown start ${s}`);
const port = Number(values.port);
const base = `http://127.0.0.1:${port}`;
const QUEUE = 'startup';

function startServer(start: string): ChildProcess {
  return spawn(process.execPath, START_COMMANDS[start]!, {
    cwd: ROOT,
    env: {
      ...process.env,
      DATABASE_URL: databaseUrl(DATABASES.baton),
      PORT: String(port),
      LOG_LEVEL: 'warn',
      LOG_FORMAT: 'json',
    },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
}

async function stop(child: ChildProcess): Promise<void> {
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  await exited;
}

async function untilReady(): Promise<void> {
  for (;;) {
    const ok = await fetch(`${base}/readyz`)
      .then((r) => r.status === 200)
      .catch(() => false);
    if (ok) return;
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** Enqueue the backlog through a server started for it (untimed). */
async function fillBacklog(jobs: number): Promise<void> {
  const child = startServer('bundle');
  await untilReady();
  const client = new HttpClient(base, 8);
  for (let i = 0; i < jobs; i += 500) {
    const batch = Array.from({ length: Math.min(500, jobs - i) }, (_, k) => ({ payload: { n: i + k } }));
    const res = await client.post(`/v1/queues/${QUEUE}/jobs/batch`, { jobs: batch });
    if (res.status !== 201) throw new Error(`enqueue: ${res.status} ${JSON.stringify(res.body)}`);
  }
  client.close();
  await stop(child);
}

interface StartResult {
  readyMs: number;
  perSecond: { p50: number; p99: number; claims: number }[];
  drainedMs: number;
}

async function measure(start: string, jobs: number, workers: number): Promise<StartResult> {
  await fillBacklog(jobs);
  const client = new HttpClient(base, workers + 4);
  const spawned = performance.now();
  const child = startServer(start);
  let readyAt = 0;
  const claims: { at: number; ms: number }[] = [];
  let acked = 0;
  const work = async () => {
    while (acked < jobs) {
      const sent = performance.now();
      const res = await client.post(`/v1/queues/${QUEUE}/claim`, { max_jobs: 10 }).catch(() => undefined);
      if (res?.status !== 200) {
        await new Promise((r) => setTimeout(r, 10));
        continue;
      }
      claims.push({ at: sent, ms: performance.now() - sent });
      const got: { id: string; lease_token: string }[] = res.body.jobs;
      if (got.length === 0) {
        await new Promise((r) => setTimeout(r, 10));
        continue;
      }
      const ack = await client.post('/v1/jobs/ack', {
        acks: got.map(({ id, lease_token }) => ({ id, lease_token })),
      });
      if (ack.status !== 200) throw new Error(`ack: ${ack.status}`);
      acked += got.length;
    }
  };
  const ready = untilReady().then(() => {
    readyAt = performance.now();
  });
  await Promise.all([ready, ...Array.from({ length: workers }, work)]);
  const drainedAt = performance.now();
  client.close();
  await stop(child);
  const perSecond = [0, 1, 2, 3, 4].map((s) => {
    const inSecond = claims.filter((c) => c.at >= readyAt + s * 1000 && c.at < readyAt + (s + 1) * 1000);
    const ms = inSecond.map((c) => c.ms);
    // Claims sent before the server was ready count in its first second.
    if (s === 0) ms.push(...claims.filter((c) => c.at < readyAt).map((c) => c.ms));
    return { p50: percentile(ms, 50), p99: percentile(ms, 99), claims: ms.length };
  });
  return { readyMs: readyAt - spawned, perSecond, drainedMs: drainedAt - readyAt };
}

const fmt = (n: number) => (Number.isFinite(n) ? n.toFixed(n < 10 ? 1 : 0) : '-');
const results = new Map<string, StartResult[]>(starts.map((s) => [s, []]));
await recreateDatabase(DATABASES.baton);
for (let round = 0; round < Number(values.rounds); round++) {
  const order = round % 2 === 0 ? starts : [...starts].reverse();
  for (const start of order) {
    const r = await measure(start, Number(values.jobs), Number(values.workers));
    results.get(start)!.push(r);
    console.log(
      `round ${round + 1} ${start}: ready ${fmt(r.readyMs)} ms; claim p50/p99 ms by second after ready: ${r.perSecond
        .map((s) => `${fmt(s.p50)}/${fmt(s.p99)} (${s.claims})`)
        .join(', ')}; backlog of ${values.jobs} worked off ${fmt(r.drainedMs)} ms after ready`,
    );
  }
}
for (const [start, rs] of results) {
  const ready = rs.map((r) => r.readyMs).sort((a, b) => a - b);
  console.log(`${start}: ready ${ready.map(fmt).join(', ')} ms`);
}
