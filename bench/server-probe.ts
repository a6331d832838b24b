import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { untilReady } from './baton-server.js';
import { adminPool, databaseUrl, recreateDatabase } from './databases.js';
import { enqueue, work } from './load/baton-load.js';
import { HttpClient } from './load/http-client.js';
import { processCpuMs, processRssBytes, RssSampler } from './process-usage.js';

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
    // Write heap snapshots into this directory (idle after start-up, and after the runs).
    snapshot: { type: 'string' },
    // With --snapshot: also a snapshot this many ms into the first timed run (what is in flight).
    'snapshot-at-ms': { type: 'string' },
    // Sample allocations that survive a scavenge during the runs (see survivorSummary).
    'sample-survivors': { type: 'boolean', default: false },
    // Pass the measured server's stdout through (e.g. with --node-option=--trace-gc-nvp).
    'server-stdout': { type: 'boolean', default: false },
  },
});

const n = Number(values.jobs);
const port = Number(values.port);
const url = databaseUrl(values.db!);

const INSPECT_PORT = port + 1000;

/** The measured server (maintenance off, an inspector to read its heap), or the leader. */
async function start(leader = false): Promise<ChildProcess> {
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
    stdio: ['ignore', !leader && values['server-stdout'] ? 'inherit' : 'ignore', 'inherit'],
  });
  const at = leader ? port + 1 : port;
  if (!(await untilReady(`http://127.0.0.1:${at}`))) throw new Error('server not ready');
  return child;
}

function smaps(pid: number): string {
  const text = readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8');
  return text
    .split('\n')
    .filter((l) => /^(Rss|Anonymous|Private_Dirty|Shared_Clean):/.test(l))
    .join(' ')
    .replace(/\s+/g, ' ');
}

interface Session {
  call(method: string, params?: object): Promise<any>;
  on(event: string, listener: (params: any) => void): void;
  close(): void;
}

/** An inspector session with the measured server. */
async function session(): Promise<Session> {
  const [target] = (await (await fetch(`http://127.0.0.1:${INSPECT_PORT}/json/list`)).json()) as {
    webSocketDebuggerUrl: string;
  }[];
  const ws = new WebSocket(target!.webSocketDebuggerUrl);
  await new Promise((ok) => ws.addEventListener('open', ok, { once: true }));
  let id = 0;
  const pending = new Map<number, (result: any) => void>();
  const listeners = new Map<string, (params: any) => void>();
  ws.addEventListener('message', (e: MessageEvent) => {
    const msg = JSON.parse(String(e.data));
    if (msg.id !== undefined) pending.get(msg.id)?.(msg.result);
    else listeners.get(msg.method)?.(msg.params);
  });
  return {
    call: (method, params = {}) =>
      new Promise((ok) => {
        pending.set(++id, ok);
        ws.send(JSON.stringify({ id, method, params }));
      }),
    on: (event, listener) => listeners.set(event, listener),
    close: () => ws.close(),
  };
}

/**
 * Evaluate an expression in the server through its inspector (after a full GC when asked), or
 * write a heap snapshot (which collects garbage first) to a file.
 */
async function inspect(expression: string, collect = false, snapshotFile?: string): Promise<string> {
  const s = await session();
  if (collect) await s.call('HeapProfiler.collectGarbage');
  if (snapshotFile) {
    const chunks: string[] = [];
    s.on('HeapProfiler.addHeapSnapshotChunk', (p) => chunks.push(p.chunk));
    await s.call('HeapProfiler.takeHeapSnapshot', { reportProgress: false });
    writeFileSync(snapshotFile, chunks.join(''));
  }
  const r = await s.call('Runtime.evaluate', { expression, returnByValue: true });
  s.close();
  return String(r.result.value);
}

interface SamplingNode {
  callFrame: { functionName: string; url: string; lineNumber: number };
  selfSize: number;
  children: SamplingNode[];
}

/**
 * Bytes allocated during the runs that survived at least one scavenge (the sampling heap profiler,
 * keeping samples of objects a major GC later freed but dropping those a minor GC freed): what fills
 * the old generation with garbage when the young generation is small. Grouped by the allocating
 * function and by the first frame outside node_modules and Node's internals (the code to change).
 */
function survivorSummary(profile: { head: SamplingNode }, top = 25): string {
  const byFrame = new Map<string, number>();
  const byOwn = new Map<string, number>();
  const where = (f: SamplingNode['callFrame']) =>
    `${f.functionName || '(anonymous)'} ${f.url.replace(/^.*\/(node_modules|dist)\//, '$1/')}:${f.lineNumber + 1}`;
  let total = 0;
  const walk = (n: SamplingNode, stack: SamplingNode['callFrame'][]) => {
    const path = [...stack, n.callFrame];
    if (n.selfSize) {
      total += n.selfSize;
      const k = where(n.callFrame);
      byFrame.set(k, (byFrame.get(k) ?? 0) + n.selfSize);
      const own = [...path].reverse().find((f) => f.url.includes('/dist/src/'));
      const o = own ? where(own) : '(no Baton frame)';
      byOwn.set(o, (byOwn.get(o) ?? 0) + n.selfSize);
    }
    for (const c of n.children) walk(c, path);
  };
  walk(profile.head, []);
  const list = (m: Map<string, number>) =>
    [...m]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([k, v]) => `  ${((v / total) * 100).toFixed(1).padStart(5)}%  ${k}`)
      .join('\n');
  return `sampled survivors ${(total / 2 ** 20).toFixed(1)} MiB\nby allocating frame:\n${list(byFrame)}\nby nearest Baton frame:\n${list(byOwn)}`;
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
  const snapshot = async (name: string) => {
    if (!values.snapshot) return;
    mkdirSync(values.snapshot, { recursive: true });
    const file = resolve(values.snapshot, `${name}.heapsnapshot`);
    console.log(`${name}: ${await inspect(MEMORY, false, file)} -> ${file}`);
    console.log(`${name}: ${smaps(pid)}`);
    // The snapshot stalls the event loop; let load shedding's lag figure settle before the load.
    await new Promise((r) => setTimeout(r, 3000));
  };
  try {
    console.log(`idle after start: ${smaps(pid)}`);
    await snapshot('idle');
    const sampler = values['sample-survivors'] ? await session() : undefined;
    await sampler?.call('HeapProfiler.startSampling', {
      samplingInterval: 16384,
      includeObjectsCollectedByMajorGC: true,
      includeObjectsCollectedByMinorGC: false,
    });
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
        const rss = new RssSampler(() => pid);
        rss.start();
        const t0 = performance.now();
        const mid =
          values['snapshot-at-ms'] && round === 0
            ? new Promise((r) => setTimeout(r, Number(values['snapshot-at-ms']))).then(() =>
                snapshot(`mid-${kind}`),
              )
            : undefined;
        const producing = kind === 'cycle' ? enqueue(client, queue, n, 100, 2) : Promise.resolve();
        const end = await work(client, queue, { workers: 8, claimSize: 100, total: n, waitMs: 50 });
        await producing;
        await mid;
        const cpu = processCpuMs(pid)! - cpu0;
        const peak = rss.stop();
        console.log(
          `${kind} round ${round + 1}: ${Math.round(n / ((end - t0) / 1000))} jobs/s, server CPU ${((cpu / n) * 1000).toFixed(1)} ms per 1,000 jobs, RSS ${(processRssBytes(pid)! / 2 ** 20).toFixed(0)} MiB at the end, ${(peak / 2 ** 20).toFixed(0)} MiB peak`,
        );
      }
    }
    console.log(`end: ${smaps(pid)}`);
    if (sampler) {
      const { profile } = await sampler.call('HeapProfiler.stopSampling');
      console.log(survivorSummary(profile));
      sampler.close();
    }
    for (let t = 5; t <= Number(values['idle-seconds']); t += 5) {
      await new Promise((r) => setTimeout(r, 5000));
      console.log(`idle ${t} s: RSS ${(processRssBytes(pid)! / 2 ** 20).toFixed(0)} MiB`);
    }
    console.log(`heap: ${await inspect(MEMORY)}`);
    console.log(`after a full GC: ${await inspect(MEMORY, true)}`);
    console.log(`after a full GC: ${smaps(pid)}`);
    await snapshot('after-runs');
  } finally {
    client.close();
    await admin.end();
    child.kill('SIGTERM');
    leader.kill('SIGTERM');
  }
}

await main();
