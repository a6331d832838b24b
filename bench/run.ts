import { spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, totalmem } from 'node:os';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { ROOT } from './baton-server.js';
import { BenchContext } from './context.js';
import { DATABASES, recreateDatabase, serverVersion } from './databases.js';
import { formatSummary, newestProfile, type ProfileSummary, summariseProfile } from './profile-summary.js';
import { markdown, plain, type ScenarioResult } from './report.js';
import { claimCost } from './scenarios/claim-cost.js';
import { enqueueOnly } from './scenarios/enqueue.js';
import { flowControl } from './scenarios/flow.js';
import { fullCycleBatched } from './scenarios/full-cycle-batched.js';
import { heldHorizon } from './scenarios/held-horizon.js';
import { hotRenewals } from './scenarios/hot-renewals.js';
import { onePerRequest } from './scenarios/one-per-request.js';
import { pruneCost } from './scenarios/prune-cost.js';
import { schedulesScenario } from './scenarios/schedules.js';
import { sqsVersusNative } from './scenarios/sqs.js';
import { sustainedChurn } from './scenarios/sustained-churn.js';
import { uniqueKeysScenario } from './scenarios/unique-keys.js';
import { wakeLatency } from './scenarios/wake-latency.js';
import { workerLibraries } from './scenarios/worker-libraries.js';
import { FULL, QUICK, type Sizes } from './sizes.js';

/**
 * `npm run bench` (full) or `npm run bench -- --quick` (a smoke run of about two minutes).
 * Options: `--only batched,single,...` to run some scenarios, `--rounds N`, `--no-build`,
 * `--only horizon --hold-minutes 10 --clean-minutes 3 --recovery-minutes 3 --rate 2000` (held horizon),
 * `--only flow --flow-parts batched,enqueue` (some of flow control's parts: cost, batched, enqueue, fairness),
 * `--systems baton,graphile,pg-boss,raw` to measure only some systems, and
 * `--profile` to record a V8 CPU profile of the Baton server (bench/results/profiles/) and summarise it.
 * Builds the server (dist/), re-creates the bench databases, runs the scenarios, prints tables and
 * writes bench/results/latest.json and latest.md.
 */

type ScenarioRun = (ctx: BenchContext) => Promise<ScenarioResult | ScenarioResult[]>;

const SCENARIOS: Record<string, ScenarioRun> = {
  batched: fullCycleBatched,
  single: onePerRequest,
  enqueue: enqueueOnly,
  'claim-cost': claimCost,
  hot: hotRenewals,
  wake: wakeLatency,
  prune: pruneCost,
  churn: sustainedChurn,
  horizon: (ctx) =>
    heldHorizon(ctx, {
      cleanSeconds: minutes(values['clean-minutes'], 3),
      holdSeconds: minutes(values['hold-minutes'], 10),
      recoverySeconds: minutes(values['recovery-minutes'], 3),
      rate: Number(values.rate ?? 2000),
      intervalSeconds: Number(values['interval-seconds'] ?? 30),
      hold: values.hold === 'readers' ? 'readers' : 'idle',
    }),
  schedules: schedulesScenario,
  unique: uniqueKeysScenario,
  sqs: sqsVersusNative,
  libraries: workerLibraries,
  flow: (ctx) =>
    flowControl(
      ctx,
      values['flow-parts']?.split(',').map((s) => s.trim()),
    ),
};

/**
 * Scenarios that only mean something over long runs (the schedules one needs whole minutes), or
 * that take minutes even at quick sizes (flow seeds five queues): a quick run leaves them out
 * unless asked.
 */
const LONG = ['churn', 'horizon', 'schedules', 'flow', 'unique'];

function positiveInteger(value: string, option: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new Error(`${option} expects a positive integer, got ${value}`);
  return n;
}

function minutes(value: string | undefined, fallback: number): number {
  const m = value === undefined ? fallback : Number(value);
  if (!(m > 0)) throw new Error(`expected a positive number of minutes, got ${value}`);
  return Math.round(m * 60);
}

const { values } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    only: { type: 'string' },
    rounds: { type: 'string' },
    'no-build': { type: 'boolean', default: false },
    profile: { type: 'boolean', default: false },
    systems: { type: 'string' },
    // --only horizon: phase lengths in minutes (fractions allowed), offered jobs/s, interval length.
    'clean-minutes': { type: 'string' },
    'hold-minutes': { type: 'string' },
    'recovery-minutes': { type: 'string' },
    rate: { type: 'string' },
    // Write bench/results/<out>.json and .md instead of latest.* (kept for the full run).
    out: { type: 'string' },
    'interval-seconds': { type: 'string' },
    // --only horizon: what holds the horizon (idle: one idle transaction; readers: four RR readers).
    hold: { type: 'string' },
    // --only flow: some of its parts (cost, batched, enqueue, fairness); all when unset.
    'flow-parts': { type: 'string' },
    // Scenario 1: Baton's HTTP workers (the load generator's concurrency; 8 by default).
    'batched-workers': { type: 'string' },
    help: { type: 'boolean', short: 'h', default: false },
  },
});

if (values.help) {
  console.log(`npm run bench [-- options]
  --quick                 smoke run at small sizes (leaves out ${LONG.join(', ')} unless named in --only)
  --only a,b              scenarios: ${Object.keys(SCENARIOS).join(', ')}
  --rounds N              rounds per measurement
  --systems a,b           baton, graphile, pg-boss, raw
  --no-build              use the dist/ already built
  --profile               record and summarise a V8 CPU profile of the Baton server
  --out NAME              write bench/results/NAME.json and .md instead of latest.*
  --clean-minutes M --hold-minutes M --recovery-minutes M --rate N --interval-seconds S
  --hold idle|readers   (horizon: one idle transaction, or four REPEATABLE READ readers of baton.jobs)
  --flow-parts cost,batched,enqueue,fairness   (flow)
  --batched-workers N     Baton's HTTP workers in scenario 1 (default 8)
Method, machine and results: docs/benchmarks.md.`);
  process.exit(0);
}

/** The server as production runs it: compiled, then bundled into dist/baton.mjs (npm run build). */
function build(): void {
  const tsc = resolve(ROOT, 'node_modules/typescript/bin/tsc');
  const r = spawnSync(process.execPath, [tsc, '-p', 'tsconfig.build.json'], { cwd: ROOT, stdio: 'inherit' });
  if (r.status !== 0) throw new Error('build failed (tsc -p tsconfig.build.json)');
  const bundle = spawnSync(process.execPath, ['--import', 'tsx', 'scripts/bundle-server.ts'], {
    cwd: ROOT,
    stdio: 'inherit',
  });
  if (bundle.status !== 0) throw new Error('build failed (scripts/bundle-server.ts)');
}

async function main() {
  const base: Sizes = values.quick ? QUICK : FULL;
  const sizes: Sizes = {
    ...base,
    ...(values.rounds ? { rounds: Number(values.rounds) } : {}),
    ...(values['batched-workers']
      ? { batchedWorkers: positiveInteger(values['batched-workers'], '--batched-workers') }
      : {}),
  };
  const defaults = Object.keys(SCENARIOS).filter((name) => !(values.quick && LONG.includes(name)));
  const selected = values.only ? values.only.split(',').map((s) => s.trim()) : defaults;
  for (const name of selected) {
    if (!SCENARIOS[name])
      throw new Error(`unknown scenario ${name}; known: ${Object.keys(SCENARIOS).join(', ')}`);
  }
  const started = Date.now();
  const log = (m: string) => console.log(`[${((Date.now() - started) / 1000).toFixed(1).padStart(6)}s] ${m}`);

  if (!values['no-build']) {
    log('building the server (tsc -p tsconfig.build.json, then scripts/bundle-server.ts)');
    build();
  }
  const machine = {
    cpus: cpus().length,
    cpuModel: cpus()[0]?.model ?? 'unknown',
    memoryGiB: Math.round((totalmem() / 2 ** 30) * 10) / 10,
    node: process.version,
    postgres: await serverVersion(),
    loadAverageAtStart: loadavg(),
  };
  log(`machine: ${machine.cpus} cores (${machine.cpuModel}), ${machine.memoryGiB} GiB, Node ${machine.node}`);
  log(`postgres: ${machine.postgres}`);
  for (const db of Object.values(DATABASES)) await recreateDatabase(db);

  const dir = resolve(ROOT, 'bench/results');
  const profileDir = values.profile ? resolve(dir, 'profiles') : undefined;
  if (profileDir) mkdirSync(profileDir, { recursive: true });
  const ctx = new BenchContext(sizes, Boolean(values.quick), log, profileDir);
  if (values.systems) ctx.systems = values.systems.split(',').map((s) => s.trim());
  const results: ScenarioResult[] = [];
  let profile: ProfileSummary | undefined;
  try {
    for (const name of selected) {
      log(`scenario ${name}`);
      const out = await SCENARIOS[name]!(ctx);
      for (const result of Array.isArray(out) ? out : [out]) {
        results.push(result);
        console.log(plain(result));
      }
    }
  } finally {
    await ctx.close();
  }
  if (profileDir) {
    const file = newestProfile(profileDir);
    if (file) {
      profile = summariseProfile(file);
      console.log(formatSummary(profile));
    }
  }

  mkdirSync(dir, { recursive: true });
  const record = {
    date: new Date().toISOString(),
    mode: values.quick ? 'quick' : 'full',
    command: `npm run bench${process.argv.length > 2 ? ` -- ${process.argv.slice(2).join(' ')}` : ''}`,
    durationSeconds: Math.round((Date.now() - started) / 1000),
    machine: { ...machine, loadAverageAtEnd: loadavg() },
    sizes,
    results,
    ...(profile ? { serverProfile: profile } : {}),
  };
  const name = values.out ?? 'latest';
  if (!/^[\w.-]+$/.test(name)) throw new Error(`--out must be a plain file name, got ${name}`);
  writeFileSync(resolve(dir, `${name}.json`), `${JSON.stringify(record, null, 2)}\n`);
  writeFileSync(resolve(dir, `${name}.md`), `${results.map(markdown).join('\n')}\n`);
  log(`done in ${record.durationSeconds} s; wrote bench/results/${name}.json and ${name}.md`);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
