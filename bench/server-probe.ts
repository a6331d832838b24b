import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { adminPool, databaseUrl, recreateDatabase } from './databases.js';
import { enqueue, work } from './load/baton-load.js';
import { HttpClient } from './load/http-client.js';
import { processCpuMs, processRssBytes } from './process-usage.js';

/**
 * Issue 17: a quick A/B probe of the Baton server's own CPU and memory on scenario 1's load (claim
 * 100 → batch ack after an untimed enqueue of the backlog; then the full cycle), for one build at a
 * time: `npx tsx bench/server-probe.ts --root /path/to/checkout [--node-option=--max-semi-space-size=2]`.
 * Prints server CPU ms per 1,000 jobs, RSS at the end, jobs/s, and the server's smaps summary. The
 * numbers for docs/benchmarks.md come from `npm run bench` (scenario 1 and 7); this only shortens the
 * loop while changing the server.
 */

const { values } = parseArgs({
  options: {
    root: { type: 'string', default: resolve(import.meta.dirname, '..') },
    jobs: { type: 'string', default: '100000' },
    rounds: { type: 'string', default: '2' },
    port: { type: 'string', default: '18599' },
    db: { type: 'string', default: 'baton_bench' },
    'node-option': { type: 'string', multiple: true, default: [] },
    kinds: { type: 'string', default: 'processing,cycle' },
    // After the runs, watch the idle server's RSS this long (V8 shrinks an idle heap by itself).
    'idle-seconds': { type: 'string', default: '0' },
  },
});

const n = Number(values.jobs);
const port = Number(values.port);
const url = databaseUrl(values.db!);

const INSPECT_PORT = port + 1000;

/** The measured server (maintenance off, an inspector to read its heap), or the leader. */
function start(leader = false): Promise<ChildProcess> {
  const args = leader ? [] : [...values['node-option']!, `--inspect=127.0.0.1:${INSPECT_PORT}`];
  const child = spawn(process.execPath, [...args, resolve(values.root!, 'dist/src/server.js')], {
    cwd: values.root,
    env: {
      ...process.env,
      DATABASE_URL: url,
      PORT: String(leader ? port + 1 : port),
      HOST: '127.0.0.1',
      LOG_LEVEL: 'warn',
      BATON_MAINTENANCE: String(leader),
    },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const at = leader ? port + 1 : port;
  return new Promise((ok, fail) => {
    const deadline = Date.now() + 30_000;
    const poll = async () => {
      const ready = await fetch(`http://127.0.0.1:${at}/readyz`)
        .then((r) => r.ok)
        .catch(() => false);
      if (ready) ok(child);
      else if (Date.now() > deadline) fail(new Error('server not ready'));
      else setTimeout(poll, 100);
    };
    poll();
  });
}

function smaps(pid: number): string {
  const text = readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8');
  return text
    .split('\n')
    .filter((l) => /^(Rss|Anonymous|Private_Dirty|Shared_Clean):/.test(l))
    .join(' ')
    .replace(/\s+/g, ' ');
}

/** Evaluate an expression in the server through its inspector (after a full GC when asked). */
async function inspect(expression: string, collect = false): Promise<string> {
  const [target] = (await (await fetch(`http://127.0.0.1:${INSPECT_PORT}/json/list`)).json()) as {
    webSocketDebuggerUrl: string;
  }[];
  const ws = new WebSocket(target!.webSocketDebuggerUrl);
  await new Promise((ok) => ws.addEventListener('open', ok, { once: true }));
  let id = 0;
  const call = (method: string, params: object = {}) =>
    new Promise<any>((ok) => {
      const mine = ++id;
      const on = (e: MessageEvent) => {
        const msg = JSON.parse(String(e.data));
        if (msg.id === mine) {
          ws.removeEventListener('message', on);
          ok(msg.result);
        }
      };
      ws.addEventListener('message', on);
      ws.send(JSON.stringify({ id: mine, method, params }));
    });
  if (collect) await call('HeapProfiler.collectGarbage');
  const r = await call('Runtime.evaluate', { expression, returnByValue: true });
  ws.close();
  return String(r.result.value);
}

const MEMORY = `(() => {
  const mb = (b) => Math.round(b / 2 ** 20);
  const m = process.memoryUsage();
  const v8 = process.getBuiltinModule('v8');
  const spaces = v8.getHeapSpaceStatistics().map((s) => s.space_name.replace('_space', '') + ' ' + mb(s.space_size) + '/' + mb(s.space_used_size)).join(', ');
  return 'rss ' + mb(m.rss) + ', heapTotal ' + mb(m.heapTotal) + ', heapUsed ' + mb(m.heapUsed) + ', external ' + mb(m.external) + ', arrayBuffers ' + mb(m.arrayBuffers) + ' MiB; spaces (size/used MiB): ' + spaces;
})()`;

async function main() {
  if (!values.db!.endsWith('_baton') && values.db !== 'baton_bench') throw new Error('use a bench database');
  await recreateDatabase(values.db!);
  const child = await start();
  const leader = await start(true);
  const pid = child.pid!;
  const client = new HttpClient(`http://127.0.0.1:${port}`);
  const admin = adminPool(values.db!);
  try {
    for (let round = 0; round < Number(values.rounds); round++) {
      for (const kind of values.kinds!.split(',') as ('processing' | 'cycle')[]) {
        const queue = `probe-${kind}-${round}`;
        if (kind === 'processing') await enqueue(client, queue, n, 100, 2);
        else {
          await Promise.all([
            enqueue(client, queue, n / 10, 100, 2),
            work(client, queue, { workers: 8, claimSize: 100, total: n / 10, waitMs: 200 }),
          ]);
        }
        await admin.query('VACUUM ANALYZE');
        const cpu0 = processCpuMs(pid)!;
        const t0 = performance.now();
        const producing = kind === 'cycle' ? enqueue(client, queue, n, 100, 2) : Promise.resolve();
        const end = await work(client, queue, { workers: 8, claimSize: 100, total: n, waitMs: 50 });
        await producing;
        const cpu = processCpuMs(pid)! - cpu0;
        console.log(
          `${kind} round ${round + 1}: ${Math.round(n / ((end - t0) / 1000))} jobs/s, server CPU ${((cpu / n) * 1000).toFixed(1)} ms per 1,000 jobs, RSS ${(processRssBytes(pid)! / 2 ** 20).toFixed(0)} MiB`,
        );
      }
    }
    console.log(`end: ${smaps(pid)}`);
    for (let t = 5; t <= Number(values['idle-seconds']); t += 5) {
      await new Promise((r) => setTimeout(r, 5000));
      console.log(`idle ${t} s: RSS ${(processRssBytes(pid)! / 2 ** 20).toFixed(0)} MiB`);
    }
    console.log(`heap: ${await inspect(MEMORY)}`);
    console.log(`after a full GC: ${await inspect(MEMORY, true)}`);
    console.log(`after a full GC: ${smaps(pid)}`);
  } finally {
    client.close();
    await admin.end();
    child.kill('SIGTERM');
    leader.kill('SIGTERM');
  }
}

await main();
