import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { BatonServer, ROOT } from './baton-server.js';
import { adminPool, DATABASES, databaseUrl } from './databases.js';
import { enqueue, work } from './load/baton-load.js';
import { HttpClient } from './load/http-client.js';

/**
 * Where the CPU goes, measured with Linux perf (`perf record -a -g`, cpu-clock sampling, so it
 * counts CPU time only, not time spent waiting or preempted), for two workloads against a Baton
 * server started with --perf-basic-prof (JavaScript frames get names):
 * - batched: claim 100 → batch ack by 8 HTTP workers draining a backlog;
 * - single: one job per request (4 producers, 16 workers claim 1 → ack 1).
 * It splits the machine's samples by process (Baton server, load generator, PostgreSQL backends,
 * everything else), the server's samples by category (JSON, HTTP parsing, Fastify, PostgreSQL
 * client, GC, kernel networking...), and the PostgreSQL backends' samples by phase (parse, plan,
 * execute, commit). Needs `perf` and permission to record system-wide (root, or
 * kernel.perf_event_paranoid <= 0). Run after `npm run bench` (it uses the bench database and dist/):
 *   npx tsx bench/perf-breakdown.ts
 * Writes bench/results/perf-breakdown.json.
 */

const PORT = 18_490;

function report(file: string, args: string[]): { share: number; key: string }[] {
  const out = execFileSync('perf', ['report', '-i', file, '--stdio', '-g', 'none', ...args], {
    maxBuffer: 256 * 2 ** 20,
    stdio: ['ignore', 'pipe', 'ignore'],
  }).toString();
  return out
    .split('\n')
    .map((line) => /^\s+([\d.]+)%\s+(?:[\d.]+%\s+)?(.*)$/.exec(line))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => ({ share: Number(m[1]), key: m[2]!.trim() }));
}

/**
 * Server samples are attributed along the stack, leaf first: garbage collection, JSON, HTTP parsing
 * and JIT compilation by their native frames; kernel time by whether it is networking; everything
 * else (V8 builtins such as property loads and calls, which do the work of the JavaScript that calls
 * them) to the first JavaScript frame, by the package its file belongs to.
 */
const NATIVE: [string, RegExp][] = [
  [
    'GC',
    /Heap::|Scavenge|MarkCompact|Sweeper|ConcurrentMarking|MarkingVisitor|Evacuat|GCTracer|MinorMS|CppHeap/,
  ],
  [
    'JSON (JSON.parse, JSON.stringify)',
    /JsonParser|JsonStringifier|JSDataObjectBuilder|Builtins_JsonParse|Builtins_JsonStringify/,
  ],
  ['HTTP parsing (llhttp)', /llhttp|http_parser::/],
  [
    'JIT compilation',
    /maglev::|compiler::|interpreter::BytecodeGenerator|Compiler::|Parser::|Scanner::|PreParser/,
  ],
];
const JS: [string, RegExp][] = [
  ['JSON (JSON.parse, JSON.stringify)', /fast-json-stringify|secure-json-parse/],
  [
    'PostgreSQL client (pg, pg-protocol, type parsers)',
    /node_modules\/(pg|pg-protocol|pg-pool|pg-types|postgres-date|postgres-array|postgres-interval)\//,
  ],
  ['Kysely', /node_modules\/kysely\//],
  ['request validation (ajv)', /node_modules\/ajv|\bvalidate\d*\b/],
  [
    'Fastify (routing, hooks, reply)',
    /node_modules\/(fastify|find-my-way|avvio|@fastify|toad-cache|fast-querystring|fastify-plugin)\//,
  ],
  ['logging (pino)', /node_modules\/(pino|@pinojs|sonic-boom)/],
  ['Baton (src/)', /\/dist\/src\//],
  [
    'Node HTTP, net and streams',
    /node:(_http|http|net|internal\/streams|stream|internal\/stream_base|internal\/http)/,
  ],
  ['other Node internals (timers, events, promises)', /node:/],
];
const NET =
  /tcp_|sock_|skb|inet_|ip_(rcv|finish|output|queue|local)|__dev_queue|loopback|netif|net_rx|__sys_(send|recv)|sendmsg|recvmsg|sock_write_iter|sock_read_iter/;

function attribute(frames: { sym: string; dso: string }[]): string {
  if (frames.length === 0) return 'unknown';
  if (frames[0]!.dso.includes('kernel')) {
    const kernel = frames.filter((f) => f.dso.includes('kernel'));
    return kernel.some((f) => NET.test(f.sym))
      ? 'kernel: TCP loopback and sockets'
      : 'kernel: other (scheduler, syscalls, memory)';
  }
  for (const f of frames) {
    for (const [name, re] of NATIVE) if (re.test(f.sym)) return name;
    if (f.dso.startsWith('[JIT]') || f.sym.startsWith('JS:')) {
      for (const [name, re] of JS) if (re.test(f.sym)) return name;
      return 'other JavaScript';
    }
  }
  return 'V8 and Node runtime (no JavaScript frame)';
}

function serverCategories(file: string, pid: number) {
  const out = execFileSync('perf', ['script', '-i', file, '--pid', String(pid), '-F', 'pid,ip,sym,dso'], {
    maxBuffer: 2 ** 30,
    stdio: ['ignore', 'pipe', 'ignore'],
  }).toString();
  const counts = new Map<string, number>();
  let total = 0;
  for (const block of out.split(/\n\s*\n/)) {
    const frames = block
      .split('\n')
      .slice(1)
      .map((l) => /^\s*[0-9a-f]+\s+(.*)\s+\((.*)\)$/.exec(l))
      .filter((m): m is RegExpExecArray => m !== null)
      .map((m) => ({ sym: m[1]!, dso: m[2]! }));
    if (frames.length === 0) continue;
    const category = attribute(frames);
    counts.set(category, (counts.get(category) ?? 0) + 1);
    total++;
  }
  return [...counts]
    .map(([category, n]) => ({ category, share: Math.round((n / total) * 1000) / 10 }))
    .sort((a, b) => b.share - a.share);
}

const PG_PHASES: [string, string[]][] = [
  ['parse', ['pg_parse_query']],
  ['analyse and rewrite', ['pg_analyze_and_rewrite_varparams', 'pg_analyze_and_rewrite_fixedparams']],
  ['plan (including cached-plan checks)', ['pg_plan_queries', 'GetCachedPlan']],
  ['execute', ['PortalRun']],
  ['commit (incl. WAL flush)', ['CommitTransactionCommand']],
];

async function record(file: string, body: () => Promise<void>): Promise<void> {
  const perf = spawn('perf', ['record', '-a', '-g', '-e', 'cpu-clock', '-F', '999', '-o', file], {
    stdio: 'ignore',
  });
  await new Promise((r) => setTimeout(r, 500));
  try {
    await body();
  } finally {
    perf.kill('SIGINT');
    await new Promise((r) => perf.once('exit', r));
  }
}

async function main() {
  const dir = resolve(ROOT, 'bench/results');
  mkdirSync(dir, { recursive: true });
  const server = new BatonServer({
    databaseUrl: databaseUrl(DATABASES.baton),
    port: PORT,
    env: { BATON_MAINTENANCE: 'false' },
    nodeOptions: ['--perf-basic-prof-only-functions'],
  });
  await server.start();
  const client = new HttpClient(server.url);
  const admin = adminPool(DATABASES.baton);
  const results: Record<string, unknown> = {};
  try {
    const workloads: [string, () => Promise<number>][] = [
      [
        'batched',
        async () => {
          await admin.query('TRUNCATE baton.jobs, baton.job_history');
          await enqueue(client, 'perf-batched', 60_000, 100, 2);
          await admin.query('VACUUM ANALYZE');
          const file = resolve(dir, 'perf-batched.data');
          let jobs = 0;
          await record(file, async () => {
            await work(client, 'perf-batched', { workers: 8, claimSize: 100, total: 60_000, waitMs: 50 });
            jobs = 60_000;
          });
          return jobs;
        },
      ],
      [
        'single',
        async () => {
          await admin.query('TRUNCATE baton.jobs, baton.job_history');
          const file = resolve(dir, 'perf-single.data');
          let jobs = 0;
          await record(file, async () => {
            const producing = enqueue(client, 'perf-single', 3_000, 1, 4);
            await work(client, 'perf-single', { workers: 16, claimSize: 1, total: 3_000, waitMs: 200 });
            await producing;
            jobs = 3_000;
          });
          return jobs;
        },
      ],
    ];
    for (const [name, run] of workloads) {
      const t0 = performance.now();
      const jobs = await run();
      const file = resolve(dir, `perf-${name}.data`);
      const byPid = report(file, ['--no-children', '--sort', 'pid']);
      const pid = (r: { key: string }) => Number(r.key.split(':')[0]);
      const sum = (pred: (r: { key: string }) => boolean) =>
        Math.round(byPid.filter(pred).reduce((a, r) => a + r.share, 0) * 10) / 10;
      const processes = {
        'Baton server': sum((r) => pid(r) === server.pid),
        'load generator (bench process)': sum((r) => pid(r) === process.pid),
        'PostgreSQL processes': sum((r) => /:postgres/.test(r.key)),
        idle: sum((r) => /^0:/.test(r.key)),
        'everything else (other users of the machine)': sum(
          (r) =>
            pid(r) !== server.pid && pid(r) !== process.pid && !/:postgres/.test(r.key) && !/^0:/.test(r.key),
        ),
      };
      const pgRows = report(file, ['--children', '--comm', 'postgres', '--sort', 'sym']);
      const pgTotal = report(file, ['--no-children', '--comm', 'postgres', '--sort', 'comm'])[0]?.share ?? 0;
      const phases = PG_PHASES.map(([phase, symbols]) => ({
        phase,
        share:
          Math.round(
            (pgRows
              .filter((r) => symbols.some((s) => r.key.endsWith(`] ${s}`)))
              .reduce((a, r) => a + r.share, 0) /
              (pgTotal || 1)) *
              1000,
          ) / 10,
      }));
      phases.push({
        phase: 'rest (protocol loop, bind, network I/O, idle wake-ups)',
        share: Math.round((100 - phases.reduce((a, p) => a + p.share, 0)) * 10) / 10,
      });
      results[name] = {
        jobs,
        seconds: Math.round((performance.now() - t0) / 100) / 10,
        'machine samples by process (%)': processes,
        'Baton server CPU by category (% of the server)': serverCategories(file, server.pid!),
        'PostgreSQL backends by phase (% of PostgreSQL samples, inclusive)': phases,
      };
      console.log(name, JSON.stringify(results[name], null, 2));
    }
  } finally {
    client.close();
    await admin.end();
    const pid = server.pid;
    await server.stop();
    // --perf-basic-prof writes a JIT symbol map (and V8 a code log in the working directory); they
    // are only needed while reporting.
    if (pid) {
      rmSync(`/tmp/perf-${pid}.map`, { force: true });
      for (const f of readdirSync(ROOT)) {
        if (f.startsWith('isolate-') && f.endsWith(`-${pid}-v8.log`))
          rmSync(resolve(ROOT, f), { force: true });
      }
    }
  }
  writeFileSync(resolve(dir, 'perf-breakdown.json'), `${JSON.stringify(results, null, 2)}\n`);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
