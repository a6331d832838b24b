import { mkdirSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { CpuMeter } from '../cpu-split.js';
import { SERVER_URL } from '../databases.js';
import { PostgresCpu } from '../postgres-cpu.js';
import { fmt, median, percentile } from '../stats.js';
import {
  LAYOUTS,
  type Layout,
  type LayoutName,
  layout,
  type RingOptions,
  type TruncateOutcome,
} from './layouts.js';

/**
 * PROTOTYPE (issue 15): candidate storage layouts measured side by side, raw SQL, no HTTP, no
 * Baton server. See bench/prototypes/README.md and docs/design/storage-ring.md.
 *
 *   npx tsx bench/prototypes/run.ts [--experiments plans,cpu,hold] [--layouts single,ring1,ring,ring-inplace]
 *       [--hold-seconds 180] [--rate 2000] [--rounds 3] [--jobs 100000] [--slots 8] [--period-ms 2000]
 *       [--out name]
 *
 * Database: <BENCH_DB_PREFIX or horizon_bench>_proto on BENCH_PG_URL (dropped and re-created).
 * Experiments:
 *   plans  generic plans (EXPLAIN EXECUTE under plan_cache_mode = force_generic_plan) of claim, ack,
 *          renew and lookup on each layout, and the buffers a lookup by id reads;
 *   cpu    no held horizon: a backlog of --jobs drained by 4 clients claiming 100 and acking 100,
 *          with each layout's maintenance running; PostgreSQL CPU per 1,000 jobs (whole server from
 *          /proc, and the backends of this database), jobs/s; rounds interleaved;
 *   hold   per layout: 30 s clean, --hold-seconds with a transaction held open (BEGIN; SELECT
 *          txid_current(); idle), 30 s after; producer at --rate jobs/s (a batch every 100 ms), 4
 *          workers claiming 50 and acking (0.5% of jobs held 60 s and renewed every 10 s); per 10 s:
 *          throughput, claim latency, EXPLAIN buffers of a claim of 50, sizes, truncations.
 */

const { values } = parseArgs({
  options: {
    experiments: { type: 'string', default: 'plans,cpu,hold' },
    layouts: { type: 'string', default: LAYOUTS.join(',') },
    'hold-seconds': { type: 'string', default: '180' },
    'clean-seconds': { type: 'string', default: '30' },
    'after-seconds': { type: 'string', default: '30' },
    rate: { type: 'string', default: '2000' },
    rounds: { type: 'string', default: '3' },
    jobs: { type: 'string', default: '100000' },
    slots: { type: 'string', default: '8' },
    'period-ms': { type: 'string', default: '2000' },
    'slot-ids': { type: 'string', default: '4000' },
    'lock-timeout-ms': { type: 'string', default: '50' },
    'long-fraction': { type: 'string', default: '0.005' },
    // Baton's sessions would run the hot statements with these off (see docs/design/storage-ring.md,
    // "Plans"): ring partitions swing between empty and thousands of rows every few seconds, and a
    // generic plan made while a partition looked empty keeps a sequential scan or a hash join over
    // every partition. jit=off goes with it: a disabled plan node adds 1e10 to the cost on
    // PostgreSQL 15, which is over jit_above_cost, and JIT compiling took 40-700 ms per statement.
    // `off` measures without the guard.
    'planner-guard': { type: 'string', default: 'on' },
    out: { type: 'string' },
  },
});

const DB = `${process.env.BENCH_DB_PREFIX ?? 'horizon_bench'}_proto`;
const QUEUE = 'proto';
const ring: RingOptions = {
  slots: Number(values.slots),
  periodMs: Number(values['period-ms']),
  slotIds: Number(values['slot-ids']),
  lockTimeoutMs: Number(values['lock-timeout-ms']),
};
const selected = values.layouts!.split(',').map((s) => s.trim()) as LayoutName[];
for (const l of selected) if (!LAYOUTS.includes(l)) throw new Error(`unknown layout ${l}`);
const layouts = selected.map((l) => layout(l, ring));
const started = Date.now();
const log = (m: string) => console.log(`[${((Date.now() - started) / 1000).toFixed(1).padStart(6)}s] ${m}`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const GUARD =
  values['planner-guard'] === 'on'
    ? '-c enable_seqscan=off -c enable_hashjoin=off -c enable_mergejoin=off -c jit=off'
    : '';

/** Pools for a ring layout's statements get the planner guard; today's layout runs as Baton does now. */
function pool(max: number, name: string, guarded = true): pg.Pool {
  const p = new pg.Pool({
    connectionString: `${SERVER_URL}/${DB}`,
    max,
    application_name: name,
    ...(GUARD && name !== 'bench-admin' && guarded ? { options: GUARD } : {}),
  });
  p.on('error', () => {});
  return p;
}

async function recreate(): Promise<void> {
  const admin = new pg.Client({ connectionString: `${SERVER_URL}/postgres` });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS ${DB} WITH (FORCE)`);
  await admin.query(`CREATE DATABASE ${DB}`);
  await admin.end();
  const c = new pg.Client({ connectionString: `${SERVER_URL}/${DB}` });
  await c.connect();
  for (const l of layouts) await c.query(l.ddl);
  await c.end();
}

async function count(p: pg.Pool | pg.ClientBase, text: string): Promise<number> {
  const { rows } = await p.query(text);
  return Number(rows[0].n);
}

async function bytes(p: pg.Pool, relations: string[]): Promise<number> {
  if (relations.length === 0) return 0;
  const { rows } = await p.query(
    `SELECT coalesce(sum(pg_relation_size(r::regclass)), 0)::float8 AS b FROM unnest($1::text[]) r`,
    [relations],
  );
  return rows[0].b;
}

/** EXPLAIN (ANALYZE, BUFFERS) of a statement in a transaction rolled back: buffers and time. */
async function explain(client: pg.ClientBase, text: string, params: unknown[]) {
  await client.query('BEGIN');
  try {
    const { rows } = await client.query(`EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${text}`, params);
    const top = rows[0]['QUERY PLAN'][0];
    return {
      buffers: top.Plan['Shared Hit Blocks'] + top.Plan['Shared Read Blocks'],
      ms: top['Execution Time'] as number,
      planningMs: top['Planning Time'] as number,
    };
  } finally {
    await client.query('ROLLBACK');
  }
}

let fallbacks = 0;
let movedRetries = 0;

/** Run `f` again when it fails with 40001 (it waited for a row that a carry moved to another slot). */
async function retryMoved<T>(f: () => Promise<T>): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await f();
    } catch (err) {
      if ((err as { code?: string }).code !== '40001' || attempt >= 5) throw err;
      movedRetries++;
    }
  }
}

/** Ack with the slot hint, then (for a row the leader carried meanwhile) anywhere. Throws if any is lost. */
async function ackAll(c: pg.ClientBase, l: Layout, items: { id: string; token: string }[]): Promise<number> {
  const input = JSON.stringify(items);
  const n = await retryMoved(
    async () => (await c.query({ name: 'ack', text: l.ack, values: [input] })).rowCount ?? 0,
  );
  if (n === items.length) return n;
  fallbacks++;
  const m = await retryMoved(
    async () => (await c.query({ name: 'ack_anywhere', text: l.ackAnywhere, values: [input] })).rowCount ?? 0,
  );
  if (n + m !== items.length) throw new Error(`${l.name}: ack matched ${n} + ${m} of ${items.length}`);
  return n + m;
}

async function renewOne(c: pg.ClientBase, l: Layout, id: string, token: string): Promise<void> {
  const hinted = await retryMoved(
    async () => (await c.query({ name: 'renew', text: l.renew, values: [id, token] })).rowCount,
  );
  if (hinted === 1) return;
  fallbacks++;
  const anywhere = await retryMoved(
    async () =>
      (await c.query({ name: 'renew_anywhere', text: l.renewAnywhere, values: [id, token] })).rowCount,
  );
  if (anywhere !== 1) throw new Error(`${l.name}: renew lost ${id}`);
}

/** Runs a layout's maintenance every `everyMs` until stopped; collects its outcomes. */
function leader(l: Layout, p: pg.Pool, everyMs: number) {
  const truncations: TruncateOutcome[] = [];
  let vacuums = 0;
  let carried = 0;
  let stop = false;
  let error: unknown;
  const done = (async () => {
    while (!stop) {
      try {
        const r = await l.maintain(p);
        truncations.push(...r.truncations);
        vacuums += r.vacuums;
        carried += r.carried ?? 0;
      } catch (err) {
        error = err;
        return;
      }
      await sleep(everyMs);
    }
  })();
  return {
    truncations,
    get vacuums() {
      return vacuums;
    },
    get carried() {
      return carried;
    },
    async stop() {
      stop = true;
      await done;
      if (error) throw error;
    },
  };
}

// ---------------------------------------------------------------------------------------------
// plans

async function plans(): Promise<Record<string, unknown>> {
  const out: Record<string, unknown> = {};
  for (const l of layouts) {
    const p = pool(2, 'proto-plans', !l.name.startsWith('single'));
    const c = await p.connect();
    try {
      await c.query(l.enqueue, [QUEUE, 5_000]);
      const claimed = await c.query(l.claim(100), [QUEUE, 'w']);
      const acks = JSON.stringify(
        claimed.rows.slice(0, 50).map((r) => ({ id: String(r.id), token: r.lease_token })),
      );
      await c.query(l.ack, [acks]);
      const held = claimed.rows[60]!;
      await c.query(`ANALYZE`);
      const finished = claimed.rows[0]!;
      const ready = await c.query(
        `SELECT max(id) AS id FROM ${l.schema}.${l.name.startsWith('single') || l.name.startsWith('ring1') ? 'jobs' : 'ready'}`,
      );
      const statements: Record<string, [string, unknown[]]> = {
        claim: [l.claim(50), [QUEUE, 'w']],
        ack: [l.ack, [JSON.stringify([{ id: String(held.id), token: held.lease_token }])]],
        renew: [l.renew, [held.id, held.lease_token]],
        'lookup (ready job)': [l.lookup, [ready.rows[0].id]],
        'lookup (finished job)': [l.lookup, [finished.id]],
      };
      const plansOf: Record<string, unknown> = {};
      for (const [name, [text, params]] of Object.entries(statements)) {
        await c.query('BEGIN');
        await c.query(`SET LOCAL plan_cache_mode = force_generic_plan`);
        const stmt = `p_${name.replace(/\W+/g, '_')}`;
        await c.query(`PREPARE ${stmt} AS ${text}`);
        const types = params.map(() => 'unknown');
        void types;
        const args = params.map((v) =>
          typeof v === 'number' ? String(v) : `'${String(v).replaceAll("'", "''")}'`,
        );
        const { rows } = await c.query(
          `EXPLAIN (ANALYZE, BUFFERS, COSTS OFF, SUMMARY ON) EXECUTE ${stmt}(${args.join(', ')})`,
        );
        await c.query('ROLLBACK');
        await c.query(`DEALLOCATE ALL`);
        const text2 = rows.map((r) => r['QUERY PLAN']).join('\n');
        const buffers = /Buffers: shared hit=(\d+)(?: read=(\d+))?/.exec(text2);
        plansOf[name] = {
          plan: text2,
          topBuffers: buffers ? Number(buffers[1]) + Number(buffers[2] ?? 0) : null,
        };
        log(
          `  plans ${l.name} ${name}: ${buffers ? `${Number(buffers[1]) + Number(buffers[2] ?? 0)} buffers` : ''}`,
        );
      }
      out[l.name] = plansOf;
    } finally {
      c.release();
      await p.end();
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// cpu: drain a backlog, claim 100 + ack 100, no held horizon.

interface CpuRun {
  layout: string;
  round: number;
  jobs: number;
  seconds: number;
  jobsPerSecond: number;
  pgServerPer1000: number;
  pgBackendsPer1000: number;
  truncated: number;
  blocked: number;
  maxLockWaitMs: number;
  maxTruncateMs: number;
  claimP99: number;
  claimMax: number;
  claimsOverlappingTruncation: number;
  claimP99OverlappingTruncation: number;
}

async function drain(l: Layout, round: number, jobs: number): Promise<CpuRun> {
  const admin = pool(2, 'bench-admin');
  const work = pool(4, 'proto-work', !l.name.startsWith('single'));
  const lead = pool(2, 'proto-leader', !l.name.startsWith('single'));
  try {
    await admin.query(l.reset);
    for (let done = 0; done < jobs; done += 10_000)
      await admin.query(l.enqueue, [QUEUE, Math.min(10_000, jobs - done)]);
    await admin.query(`VACUUM ANALYZE`);
    const meter = new CpuMeter(admin, DB);
    await meter.start();
    const leaderRun = leader(l, lead, 250);
    const t0 = performance.now();
    const claims: [number, number][] = [];
    let acked = 0;
    await Promise.all(
      Array.from({ length: 4 }, async (_, w) => {
        const c = await work.connect();
        try {
          while (true) {
            const a = performance.now();
            const { rows } = await c.query({ name: 'claim', text: l.claim(100), values: [QUEUE, `w${w}`] });
            claims.push([a, performance.now()]);
            if (rows.length === 0) {
              // Empty can also mean: every remaining row is locked by another worker's claim.
              if ((await count(c, l.live)) === 0) break;
              await sleep(2);
              continue;
            }
            const n = await ackAll(
              c,
              l,
              rows.map((r) => ({ id: String(r.id), token: r.lease_token })),
            );
            acked += n;
          }
        } finally {
          c.release();
        }
      }),
    );
    // The in-place variants write history in the leader's copy: finish it, it is part of the cost.
    await leaderRun.stop();
    if (l.flush) await l.flush(lead);
    for (let h = await count(admin, l.history); h >= 0 && h < jobs && performance.now() - t0 < 120_000; ) {
      await sleep(50);
      h = await count(admin, l.history);
    }
    const seconds = (performance.now() - t0) / 1000;
    const cpu = await meter.stop();
    if (acked !== jobs) throw new Error(`${l.name}: acked ${acked} of ${jobs}`);
    const t = leaderRun.truncations;
    const windows = t.map((x) => [x.start, x.end] as const);
    const overlapping = claims
      .filter(([a, b]) => windows.some(([s, e]) => a < e && b > s))
      .map(([a, b]) => b - a);
    const lat = claims.map(([a, b]) => b - a);
    return {
      layout: l.name,
      round,
      jobs,
      seconds,
      jobsPerSecond: jobs / seconds,
      pgServerPer1000: (cpu.postgresServer / jobs) * 1000,
      pgBackendsPer1000: (cpu.postgres / jobs) * 1000,
      truncated: t.filter((x) => x.outcome === 'truncated').length,
      blocked: t.filter((x) => x.outcome === 'blocked').length,
      maxLockWaitMs: Math.max(0, ...t.map((x) => x.lockWaitMs)),
      maxTruncateMs: Math.max(0, ...t.map((x) => x.end - x.start)),
      claimP99: percentile(lat, 99),
      claimMax: Math.max(...lat),
      claimsOverlappingTruncation: overlapping.length,
      claimP99OverlappingTruncation: percentile(overlapping, 99),
    };
  } finally {
    await admin.end();
    await work.end();
    await lead.end();
  }
}

async function cpuExperiment(): Promise<CpuRun[]> {
  const runs: CpuRun[] = [];
  const rounds = Number(values.rounds);
  for (let round = 0; round < rounds; round++) {
    const order = round % 2 === 0 ? layouts : [...layouts].reverse();
    for (const l of order) {
      const r = await drain(l, round, Number(values.jobs));
      runs.push(r);
      log(
        `  cpu ${l.name} round ${round + 1}: ${fmt(r.jobsPerSecond)} jobs/s; PG ${fmt(r.pgServerPer1000)} ms/1k (server), ${fmt(r.pgBackendsPer1000)} (backends); truncated ${r.truncated}, blocked ${r.blocked}; claim p99 ${fmt(r.claimP99)} max ${fmt(r.claimMax)} ms; load ${fmt(loadavg()[0]!)}`,
      );
    }
  }
  return runs;
}

// ---------------------------------------------------------------------------------------------
// hold: steady offered load through a held horizon.

interface HoldInterval {
  layout: string;
  phase: 'clean' | 'hold' | 'after';
  to: number;
  completedPerS: number;
  claims: number;
  claimP50: number;
  claimP99: number;
  claimMax: number;
  explainBuffers: number;
  explainMs: number;
  claimWalkMiB: number;
  liveMiB: number;
  pgCpuPer1000: number;
  truncated: number;
  blocked: number;
  maxLockWaitMs: number;
  maxTruncateMs: number;
  claimP99OverlappingTruncation: number;
  backlog: number;
  longHeld: number;
  carried: number;
  fallbacks: number;
  movedRetries: number;
  renewals: number;
  renewP99: number;
  /** Updates and HOT updates in the layout's schema (pg_stat_user_tables) during the interval. */
  updates: number;
  hotUpdates: number;
  load1: number;
}

async function holdRun(l: Layout): Promise<HoldInterval[]> {
  const admin = pool(2, 'bench-admin');
  const work = pool(7, 'proto-work', !l.name.startsWith('single'));
  const lead = pool(2, 'proto-leader', !l.name.startsWith('single'));
  const rate = Number(values.rate);
  const perTick = Math.round(rate / 10);
  const cleanS = Number(values['clean-seconds']);
  const holdS = Number(values['hold-seconds']);
  const afterS = Number(values['after-seconds']);
  const longFraction = Number(values['long-fraction']);
  const intervals: HoldInterval[] = [];
  let stop = false;
  const errors: unknown[] = [];
  let enqueued = 0;
  let claimedTotal = 0;
  let acked = 0;
  let claims: [number, number][] = [];
  let renewMs: number[] = [];
  const long: { id: string; token: string; at: number; renewed: number }[] = [];
  const updateStats = async () => {
    const { rows } = await admin.query(
      `SELECT coalesce(sum(n_tup_upd), 0)::float8 AS upd, coalesce(sum(n_tup_hot_upd), 0)::float8 AS hot
       FROM pg_stat_user_tables WHERE schemaname = $1`,
      [l.schema],
    );
    return { upd: rows[0].upd as number, hot: rows[0].hot as number };
  };
  const explainClient = new pg.Client({
    connectionString: `${SERVER_URL}/${DB}`,
    application_name: 'bench-admin',
    ...(GUARD && !l.name.startsWith('single') ? { options: GUARD } : {}),
  });
  await explainClient.connect();
  let holder: pg.Client | undefined;
  try {
    await admin.query(l.reset);
    await admin.query('VACUUM ANALYZE');
    const leaderRun = leader(l, lead, 500);
    const producer = (async () => {
      const t0 = performance.now();
      for (let tick = 0; !stop; tick++) {
        const wait = t0 + tick * 100 - performance.now();
        if (wait > 0) await sleep(wait);
        work
          .query({ name: 'enqueue', text: l.enqueue, values: [QUEUE, perTick] })
          .then(() => {
            enqueued += perTick;
          })
          .catch((e) => errors.push(e));
      }
    })();
    const workers = Array.from({ length: 4 }, async (_, w) => {
      const c = await work.connect();
      try {
        while (!stop) {
          const a = performance.now();
          const { rows } = await c.query({ name: 'claim', text: l.claim(50), values: [QUEUE, `w${w}`] });
          claims.push([a, performance.now()]);
          if (rows.length === 0) {
            await sleep(20);
            continue;
          }
          claimedTotal += rows.length;
          const now: typeof rows = [];
          for (const r of rows) {
            if (Math.random() < longFraction)
              long.push({ id: String(r.id), token: r.lease_token, at: a, renewed: a });
            else now.push(r);
          }
          if (now.length === 0) continue;
          const n = await ackAll(
            c,
            l,
            now.map((r) => ({ id: String(r.id), token: r.lease_token })),
          );
          acked += n;
        }
      } catch (err) {
        errors.push(err);
      } finally {
        c.release();
      }
    });
    // Long jobs: renewed every 10 s, acked after 60 s.
    const renewer = (async () => {
      const c = await work.connect();
      try {
        while (!stop) {
          await sleep(500);
          const now = performance.now();
          const due = long.filter((j) => now - j.at >= 60_000);
          for (const j of long) {
            if (now - j.renewed >= 10_000 && now - j.at < 60_000) {
              const t = performance.now();
              await renewOne(c, l, j.id, j.token);
              renewMs.push(performance.now() - t);
              j.renewed = now;
            }
          }
          if (due.length > 0) {
            const n = await ackAll(
              c,
              l,
              due.map((j) => ({ id: j.id, token: j.token })),
            );
            acked += n;
            for (const j of due) long.splice(long.indexOf(j), 1);
          }
        }
      } catch (err) {
        errors.push(err);
      } finally {
        c.release();
      }
    })();

    const pgCpu = await PostgresCpu.of(admin);
    const t0 = performance.now();
    const elapsed = () => (performance.now() - t0) / 1000;
    let last = {
      at: 0,
      pg: pgCpu.now(),
      acked: 0,
      truncations: 0,
      carried: 0,
      fallbacks,
      movedRetries,
      stats: await updateStats(),
    };
    const claimSql = l.claim(50);
    const close = async (phase: HoldInterval['phase']) => {
      const at = elapsed();
      const pgNow = pgCpu.now();
      const lat = claims.map(([a, b]) => b - a);
      const t = leaderRun.truncations.slice(last.truncations);
      const windows = t.map((x) => [x.start, x.end] as const);
      const overlapping = claims
        .filter(([a, b]) => windows.some(([s, e]) => a < e && b > s))
        .map(([a, b]) => b - a);
      claims = [];
      const ex = await explain(explainClient, claimSql, [QUEUE, 'explain']).catch(() => ({
        buffers: Number.NaN,
        ms: Number.NaN,
      }));
      const done = acked - last.acked;
      const stats = await updateStats();
      const renewals = renewMs;
      renewMs = [];
      const iv: HoldInterval = {
        layout: l.name,
        phase,
        to: at,
        completedPerS: done / (at - last.at),
        claims: lat.length,
        claimP50: percentile(lat, 50),
        claimP99: percentile(lat, 99),
        claimMax: lat.length ? Math.max(...lat) : Number.NaN,
        explainBuffers: ex.buffers,
        explainMs: ex.ms,
        claimWalkMiB: (await bytes(admin, await l.claimRelations(explainClient))) / 2 ** 20,
        liveMiB: (await bytes(admin, await l.liveRelations(explainClient))) / 2 ** 20,
        pgCpuPer1000: done > 0 ? ((pgNow - last.pg) / done) * 1000 : Number.NaN,
        truncated: t.filter((x) => x.outcome === 'truncated').length,
        blocked: t.filter((x) => x.outcome === 'blocked').length,
        maxLockWaitMs: Math.max(0, ...t.map((x) => x.lockWaitMs)),
        maxTruncateMs: Math.max(0, ...t.map((x) => x.end - x.start)),
        claimP99OverlappingTruncation: percentile(overlapping, 99),
        backlog: enqueued - claimedTotal,
        longHeld: long.length,
        carried: leaderRun.carried - last.carried,
        fallbacks: fallbacks - last.fallbacks,
        movedRetries: movedRetries - last.movedRetries,
        renewals: renewals.length,
        renewP99: percentile(renewals, 99),
        updates: stats.upd - last.stats.upd,
        hotUpdates: stats.hot - last.stats.hot,
        load1: loadavg()[0]!,
      };
      intervals.push(iv);
      log(
        `  hold ${l.name} ${phase} ${fmt(at)} s: ${fmt(iv.completedPerS)} jobs/s; claim p50 ${fmt(iv.claimP50)} p99 ${fmt(iv.claimP99)} max ${fmt(iv.claimMax)} ms; EXPLAIN ${fmt(iv.explainBuffers)} buffers ${fmt(iv.explainMs)} ms; walk ${fmt(iv.claimWalkMiB)} MiB, live ${fmt(iv.liveMiB)} MiB; PG ${fmt(iv.pgCpuPer1000)} ms/1k; trunc ${iv.truncated} blocked ${iv.blocked} (wait ≤ ${fmt(iv.maxLockWaitMs)} ms, txn ≤ ${fmt(iv.maxTruncateMs)} ms); carried ${iv.carried}, ack/renew fallbacks ${iv.fallbacks}, 40001 retries ${iv.movedRetries}; renewals ${iv.renewals} p99 ${fmt(iv.renewP99)} ms, HOT ${iv.hotUpdates}/${iv.updates} updates; backlog ${iv.backlog}; load ${fmt(iv.load1)}`,
      );
      last = {
        at,
        pg: pgNow,
        acked,
        truncations: leaderRun.truncations.length,
        carried: leaderRun.carried,
        fallbacks,
        movedRetries,
        stats,
      };
    };
    let phaseEnd = 0;
    const phase = async (name: HoldInterval['phase'], seconds: number) => {
      phaseEnd += seconds;
      while (last.at < phaseEnd - 0.5) {
        await sleep(Math.max(0, (Math.min(phaseEnd, last.at + 10) - elapsed()) * 1000));
        if (errors.length) throw errors[0];
        await close(name);
      }
    };
    try {
      await phase('clean', cleanS);
      holder = new pg.Client({ connectionString: `${SERVER_URL}/${DB}`, application_name: 'proto-hold' });
      await holder.connect();
      await holder.query('BEGIN');
      await holder.query('SELECT txid_current()');
      await phase('hold', holdS);
      await holder.query('ROLLBACK');
      await holder.end();
      holder = undefined;
      await phase('after', afterS);
    } finally {
      stop = true;
      await producer;
      await Promise.all(workers);
      await renewer;
      await leaderRun.stop();
    }
    if (errors.length) throw errors[0];
    // Leave the schema empty for the next run.
    return intervals;
  } finally {
    if (holder) await holder.end().catch(() => {});
    await explainClient.end();
    await admin.end();
    await work.end();
    await lead.end();
  }
}

// ---------------------------------------------------------------------------------------------

async function main() {
  const experiments = values.experiments!.split(',').map((s) => s.trim());
  log(
    `layouts ${selected.join(', ')}; ring: ${ring.slots} slots × ${ring.periodMs} ms (ring*) or × ${ring.slotIds} ids (ring1*), lock_timeout ${ring.lockTimeoutMs} ms`,
  );
  await recreate();
  const admin = new pg.Client({ connectionString: `${SERVER_URL}/${DB}` });
  await admin.connect();
  const server = await admin.query(
    `SELECT version() AS version, current_setting('autovacuum') AS autovacuum, current_setting('shared_buffers') AS shared_buffers`,
  );
  await admin.end();
  const record: Record<string, unknown> = {
    date: new Date().toISOString(),
    command: `npx tsx bench/prototypes/run.ts ${process.argv.slice(2).join(' ')}`,
    server: server.rows[0],
    ring,
    plannerGuard: values['planner-guard'],
    loadAverageAtStart: loadavg(),
  };
  if (experiments.includes('plans')) record.plans = await plans();
  if (experiments.includes('cpu')) {
    const runs = await cpuExperiment();
    record.cpu = runs;
    const byLayout = (f: (r: CpuRun) => number) =>
      Object.fromEntries(selected.map((n) => [n, median(runs.filter((r) => r.layout === n).map(f))]));
    record.cpuMedians = {
      jobsPerSecond: byLayout((r) => r.jobsPerSecond),
      pgServerPer1000: byLayout((r) => r.pgServerPer1000),
      pgBackendsPer1000: byLayout((r) => r.pgBackendsPer1000),
    };
    log(`cpu medians: ${JSON.stringify(record.cpuMedians)}`);
  }
  if (experiments.includes('hold')) {
    const all: HoldInterval[] = [];
    for (const l of layouts) all.push(...(await holdRun(l)));
    record.hold = all;
  }
  record.loadAverageAtEnd = loadavg();
  record.durationSeconds = Math.round((Date.now() - started) / 1000);
  const dir = resolve(import.meta.dirname, '..', 'results');
  mkdirSync(dir, { recursive: true });
  const name = values.out ?? `prototypes-${new Date().toISOString().slice(0, 10)}`;
  writeFileSync(resolve(dir, `${name}.json`), `${JSON.stringify(record, null, 2)}\n`);
  log(`wrote bench/results/${name}.json`);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
