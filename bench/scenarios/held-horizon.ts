import { loadavg } from 'node:os';
import pg from 'pg';
import { connectionOptions } from '../../src/db/database.js';
import type { BatonServer } from '../baton-server.js';
import { claimFloorsSql, claimFromFloorSql, claimSql } from '../compiled-statements.js';
import type { BenchContext } from '../context.js';
import { adminPool, DATABASES, databaseUrl } from '../databases.js';
import { explainClaim } from '../explain-claim.js';
import { HttpClient } from '../load/http-client.js';
import { PostgresCpu } from '../postgres-cpu.js';
import { selfCpuMs } from '../process-usage.js';
import type { Check, Metric, ScenarioResult } from '../report.js';
import { fmt, median, percentile } from '../stats.js';

/**
 * Baton at a steady offered load while another session holds a transaction open (and so
 * the xmin horizon) in the same database.
 *
 * Three phases at one fixed offered rate, all through Baton's HTTP API:
 *   clean     no long transaction;
 *   hold      a separate session runs BEGIN; SELECT txid_current(); and then idles in that
 *             transaction, so no vacuum (the leader's vacuum duty, autovacuum) can remove a row
 *             version that died after it began;
 *   recovery  that transaction rolled back.
 * The producer enqueues a batch every 100 ms (open loop: on schedule whether or not the last
 * request has answered); four workers claim 50 and batch-ack. A worker first claims without
 * waiting (those claims are the "claim latency" below: a claim's own cost plus the HTTP hop, with no
 * long-poll wait in it) and, when that finds nothing, long-polls (wait_ms 1000) for the next batch.
 *
 * The server is a separate Baton process with the maintenance leader ON at its defaults (re-arm,
 * promote, prune, and the vacuum duty every 5 s tick), as in production.
 *
 * Per interval (30 s by default): offered, enqueued and completed jobs/s; claim latency p50/p99;
 * pickup latency (enqueue answered → claim answered) p50/p99; ready backlog and in-flight jobs
 * (from the load generator's own counts, which are exact and cost the database nothing);
 * pg_relation_size of baton.jobs and its indexes, and its dead rows; the buffers an EXPLAIN
 * (ANALYZE, BUFFERS) claim of 50 touches (rolled back); PostgreSQL's own CPU per 1,000 completed
 * jobs (whole server, /proc: bench/postgres-cpu.ts), the Baton server's and the load generator's.
 * At the end: every enqueued job was claimed and acked exactly once.
 */

const QUEUE = 'horizon';
const CLAIM = 50;
const WORKERS = 4;
const TICK_MS = 100;
const HORIZON_PORT = Number(process.env.BENCH_HORIZON_PORT ?? 18_490);

export interface HorizonOptions {
  cleanSeconds: number;
  holdSeconds: number;
  recoverySeconds: number;
  /** Offered jobs per second (enqueued in a batch every 100 ms). */
  rate: number;
  intervalSeconds: number;
  /**
   * What holds the horizon: `idle`, one transaction idle after SELECT txid_current(); `readers`, four
   * REPEATABLE READ transactions each counting baton.jobs every 100 ms and never committing (an
   * analytics reader; it also holds ACCESS SHARE on every partition of the ring).
   */
  hold: 'idle' | 'readers';
}

const READERS = 4;
const READ_EVERY_MS = 100;

/** Four analytics readers of baton.jobs (HorizonOptions.hold = 'readers'), until stop(). */
async function startReaders(onRead: (ms: number) => void): Promise<{ stop(): Promise<void> }> {
  let stopping = false;
  const clients = await Promise.all(
    Array.from({ length: READERS }, async () => {
      const c = new pg.Client({
        connectionString: databaseUrl(DATABASES.baton),
        application_name: 'horizon-reader',
      });
      await c.connect();
      await c.query('SET idle_in_transaction_session_timeout = 0');
      await c.query('SET statement_timeout = 0');
      await c.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
      return c;
    }),
  );
  const loops = clients.map(async (c) => {
    while (!stopping) {
      const t0 = performance.now();
      await c.query('SELECT count(*) FROM baton.jobs');
      onRead(performance.now() - t0);
      await new Promise((r) => setTimeout(r, READ_EVERY_MS));
    }
    await c.query('ROLLBACK');
    await c.end();
  });
  return {
    stop: async () => {
      stopping = true;
      await Promise.all(loops);
    },
  };
}

type Phase = 'clean' | 'hold' | 'recovery';
const PHASES: Phase[] = ['clean', 'hold', 'recovery'];

interface Interval {
  phase: Phase;
  /** Seconds since the start of the timed run. */
  from: number;
  to: number;
  offeredPerS: number;
  enqueuedPerS: number;
  completedPerS: number;
  claims: number;
  claimP50: number;
  claimP99: number;
  claimMax: number;
  pickupP50: number;
  pickupP99: number;
  ackP99: number;
  readyBacklog: number;
  inFlight: number;
  jobsBytes: number;
  readyIndexBytes: number;
  pkeyBytes: number;
  claimedIndexBytes: number;
  historyBytes: number;
  deadRows: number;
  explainBuffers: number;
  explainMs: number;
  /** The same claim from the floor the leader would publish now (claim-floors.ts). */
  floorBuffers: number;
  floorMs: number;
  /** The leader's walk that finds the floors, as EXPLAIN ANALYZE times it. */
  walkMs: number;
  /** A reader's SELECT count(*) FROM baton.jobs, median (NaN outside the readers' hold). */
  readP50: number;
  pgCpuPer1000: number;
  serverCpuPer1000: number;
  benchCpuPer1000: number;
  vacuums: number;
  load1: number;
}

/** Enqueue batches by id range, to find when a claimed job was enqueued. */
class EnqueueTimes {
  private readonly batches: { lo: bigint; hi: bigint; at: number }[] = [];
  add(ids: string[], at: number): void {
    let lo = BigInt(ids[0]!);
    let hi = lo;
    for (const id of ids) {
      const v = BigInt(id);
      if (v < lo) lo = v;
      if (v > hi) hi = v;
    }
    this.batches.push({ lo, hi, at });
  }
  /** Enqueue time of a job, by binary search on the batches' lowest ids (sent in id order). */
  of(id: string): number | undefined {
    const v = BigInt(id);
    let a = 0;
    let b = this.batches.length - 1;
    while (a <= b) {
      const m = (a + b) >> 1;
      const batch = this.batches[m]!;
      if (v < batch.lo) b = m - 1;
      else if (v > batch.hi) a = m + 1;
      else return batch.at;
    }
    return undefined;
  }
}

/** Running counters of the load generator, drained per interval. */
class Counters {
  offered = 0;
  enqueued = 0;
  completed = 0;
  claimMs: number[] = [];
  pickupMs: number[] = [];
  ackMs: number[] = [];
  /** The readers' SELECT count(*) FROM baton.jobs, each. */
  readMs: number[] = [];
  // Totals over the whole run.
  totalEnqueued = 0;
  totalClaimed = 0;
  totalAcked = 0;
  drain() {
    const out = {
      offered: this.offered,
      enqueued: this.enqueued,
      completed: this.completed,
      claimMs: this.claimMs,
      pickupMs: this.pickupMs,
      ackMs: this.ackMs,
      readMs: this.readMs,
    };
    this.offered = 0;
    this.enqueued = 0;
    this.completed = 0;
    this.claimMs = [];
    this.pickupMs = [];
    this.ackMs = [];
    this.readMs = [];
    return out;
  }
}

function expectStatus(status: number, want: number, what: string, body: unknown): void {
  if (status !== want) throw new Error(`${what}: HTTP ${status} ${JSON.stringify(body).slice(0, 300)}`);
}

/** A few counters from the server's /metrics (Prometheus text). */
async function scrape(server: BatonServer): Promise<{ vacuums: number }> {
  const text = await fetch(`${server.url}/metrics`)
    .then((r) => r.text())
    .catch(() => '');
  let vacuums = 0;
  for (const line of text.split('\n')) {
    const m = /^baton_vacuum_total\{outcome="vacuumed"\} (\S+)/.exec(line);
    if (m) vacuums += Number(m[1]);
  }
  return { vacuums };
}

interface Sizes {
  jobsBytes: number;
  readyIndexBytes: number;
  pkeyBytes: number;
  claimedIndexBytes: number;
  historyBytes: number;
  deadRows: number;
  liveRows: number;
}

/**
 * Sizes of the live table and its indexes, summed over partitions (the ring) or of the one table
 * (the layout before it): pg_partition_tree() of a plain relation is the relation itself.
 */
async function sizes(admin: pg.Pool): Promise<Sizes> {
  const total = (rel: string) =>
    `coalesce((SELECT sum(pg_relation_size(relid)) FROM pg_partition_tree(to_regclass('${rel}'))), 0)::float8`;
  const stat = (column: string) =>
    `(SELECT coalesce(sum(${column}), 0)::float8 FROM pg_stat_user_tables
      WHERE relid IN (SELECT relid FROM pg_partition_tree('baton.jobs')))`;
  const { rows } = await admin.query(`
    SELECT ${total('baton.jobs')} AS jobs,
           ${total('baton.jobs_ready_idx')} AS ready,
           ${total('baton.jobs_pkey')} AS pkey,
           ${total('baton.jobs_claimed_idx')} AS claimed,
           pg_total_relation_size('baton.job_history')::float8 AS history,
           ${stat('n_dead_tup')} AS dead,
           ${stat('n_live_tup')} AS live`);
  const r = rows[0];
  return {
    jobsBytes: r.jobs,
    readyIndexBytes: r.ready,
    pkeyBytes: r.pkey,
    claimedIndexBytes: r.claimed,
    historyBytes: r.history,
    deadRows: r.dead,
    liveRows: r.live,
  };
}

export async function heldHorizon(ctx: BenchContext, opts: HorizonOptions): Promise<ScenarioResult> {
  const server = await ctx.extraBaton(HORIZON_PORT, { BATON_MAINTENANCE: 'true', LOG_LEVEL: 'warn' });
  const client = new HttpClient(server.url);
  const admin = adminPool(DATABASES.baton);
  const q = encodeURIComponent(QUEUE);
  const counters = new Counters();
  const enqueueTimes = new EnqueueTimes();
  const intervals: Interval[] = [];
  const fine: Record<string, number>[] = [];
  const settings = await admin.query(
    `SELECT current_setting('autovacuum') AS autovacuum, current_setting('autovacuum_naptime') AS naptime,
            current_setting('server_version') AS version`,
  );
  let holder: pg.Client | undefined;
  let readers: { stop(): Promise<void> } | undefined;
  const errors: unknown[] = [];
  const fail = (err: unknown) => {
    errors.push(err);
  };

  try {
    // Create the queue, and warm the server up for a few seconds (not measured).
    const created = await client.post(`/v1/queues/${q}/jobs/batch`, { jobs: [{ payload: { warm: true } }] });
    expectStatus(created.status, 201, 'warm-up enqueue', created.body);
    counters.totalEnqueued += 1;
    await admin.query('VACUUM ANALYZE baton.jobs');

    const perTick = Math.max(1, Math.round((opts.rate * TICK_MS) / 1000));
    let stopProducing = false;
    let stopWorking = false;
    let outstanding = 0;
    let seq = 0;
    // Ids seen by a claim, to prove no job is handed out twice; ids seen by an ack.
    const claimedIds = new Set<string>();
    const ackedIds = new Set<string>();
    let duplicateClaims = 0;

    const producer = (async () => {
      const t0 = performance.now();
      for (let tick = 0; !stopProducing; tick++) {
        const due = t0 + tick * TICK_MS;
        const wait = due - performance.now();
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
        if (stopProducing) break;
        counters.offered += perTick;
        if (outstanding >= 50) continue; // the server is far behind; the offered load still counts
        outstanding++;
        const jobs = Array.from({ length: perTick }, () => ({ payload: { i: seq++ } }));
        client
          .post(`/v1/queues/${q}/jobs/batch`, { jobs })
          .then((r) => {
            expectStatus(r.status, 201, 'batch enqueue', r.body);
            const ids = (r.body.jobs as { id: string }[]).map((j) => j.id);
            enqueueTimes.add(ids, performance.now());
            counters.enqueued += ids.length;
            counters.totalEnqueued += ids.length;
          })
          .catch(fail)
          .finally(() => outstanding--);
      }
    })();

    const handle = async (jobs: { id: string; lease_token: string }[], claimedAt: number) => {
      for (const j of jobs) {
        if (claimedIds.has(j.id)) duplicateClaims++;
        claimedIds.add(j.id);
        const at = enqueueTimes.of(j.id);
        if (at !== undefined) counters.pickupMs.push(claimedAt - at);
      }
      counters.totalClaimed += jobs.length;
      const t0 = performance.now();
      const r = await client.post('/v1/jobs/ack', {
        acks: jobs.map((j) => ({ id: j.id, lease_token: j.lease_token })),
      });
      counters.ackMs.push(performance.now() - t0);
      expectStatus(r.status, 200, 'batch ack', r.body);
      if (r.body.failed > 0) throw new Error(`batch ack: ${r.body.failed} acks failed`);
      for (const j of jobs) ackedIds.add(j.id);
      counters.completed += r.body.acked;
      counters.totalAcked += r.body.acked;
    };

    const worker = async () => {
      while (!stopWorking) {
        const t0 = performance.now();
        const now = await client.post(`/v1/queues/${q}/claim`, { max_jobs: CLAIM, lease_ms: 60_000 });
        const t1 = performance.now();
        expectStatus(now.status, 200, 'claim', now.body);
        counters.claimMs.push(t1 - t0);
        if (now.body.jobs.length > 0) {
          await handle(now.body.jobs, t1);
          continue;
        }
        const waited = await client.post(`/v1/queues/${q}/claim`, {
          max_jobs: CLAIM,
          lease_ms: 60_000,
          wait_ms: 1000,
        });
        expectStatus(waited.status, 200, 'claim (long-poll)', waited.body);
        if (waited.body.jobs.length > 0) await handle(waited.body.jobs, performance.now());
      }
    };
    const workers = Array.from({ length: WORKERS }, () => worker().catch(fail));

    // Measurement: interval boundaries, a finer 5 s sample for the time series, and the phases.
    const pgCpu = await PostgresCpu.of(admin);
    // Planned as the server plans it: a session with its request pool's settings (PoolRole).
    const explainClient = new pg.Client(
      connectionOptions(
        databaseUrl(DATABASES.baton),
        { poolSize: 1, statementTimeoutMs: 60_000, connectTimeoutMs: 10_000 },
        'bench-admin',
        'requests',
      ),
    );
    await explainClient.connect();
    const sampleOpts = { queue: QUEUE, maxJobs: CLAIM, leaseMs: 60_000, defaultLeaseMs: 30_000 };
    const sample = claimSql(sampleOpts);
    /** The leader's walk (timed), then the claim from the floor it finds for the queue. */
    const explainFromFloor = async () => {
      const walk = claimFloorsSql();
      const { rows } = await explainClient.query(`EXPLAIN (ANALYZE, FORMAT JSON) ${walk.sql}`, [
        ...walk.parameters,
      ]);
      const walkMs: number = rows[0]['QUERY PLAN'][0]['Execution Time'];
      const found = await explainClient.query(walk.sql, [...walk.parameters]);
      const row = found.rows.find((r) => r.queue === QUEUE);
      const statement = claimFromFloorSql(sampleOpts, { priority: row.priority, runAt: row.run_at });
      const floor = await explainClaim(explainClient, statement.sql, [...statement.parameters], 'jobs');
      return { floor, walkMs };
    };

    const t0 = performance.now();
    const elapsed = () => (performance.now() - t0) / 1000;
    let phase: Phase = 'clean';
    let last = {
      at: 0,
      pg: pgCpu.now(),
      server: server.cpuMs(),
      bench: selfCpuMs(),
      ...(await scrape(server)),
    };
    counters.drain();

    const closeInterval = async () => {
      const c = counters.drain();
      const at = elapsed();
      const pgNow = pgCpu.now();
      const serverNow = server.cpuMs();
      const benchNow = selfCpuMs();
      const scraped = await scrape(server);
      const s = await sizes(admin);
      const explained = await explainClaim(explainClient, sample.sql, [...sample.parameters], 'jobs').catch(
        () => ({ buffers: Number.NaN, executionMs: Number.NaN }),
      );
      const fromFloor = await explainFromFloor().catch(() => ({
        floor: { buffers: Number.NaN, executionMs: Number.NaN },
        walkMs: Number.NaN,
      }));
      const seconds = at - last.at;
      const per1000 = (ms: number) => (c.completed > 0 ? (ms / c.completed) * 1000 : Number.NaN);
      intervals.push({
        phase,
        from: last.at,
        to: at,
        offeredPerS: c.offered / seconds,
        enqueuedPerS: c.enqueued / seconds,
        completedPerS: c.completed / seconds,
        claims: c.claimMs.length,
        claimP50: percentile(c.claimMs, 50),
        claimP99: percentile(c.claimMs, 99),
        claimMax: c.claimMs.length ? Math.max(...c.claimMs) : Number.NaN,
        pickupP50: percentile(c.pickupMs, 50),
        pickupP99: percentile(c.pickupMs, 99),
        ackP99: percentile(c.ackMs, 99),
        readyBacklog: counters.totalEnqueued - counters.totalClaimed,
        inFlight: counters.totalClaimed - counters.totalAcked,
        jobsBytes: s.jobsBytes,
        readyIndexBytes: s.readyIndexBytes,
        pkeyBytes: s.pkeyBytes,
        claimedIndexBytes: s.claimedIndexBytes,
        historyBytes: s.historyBytes,
        deadRows: s.deadRows,
        explainBuffers: explained.buffers,
        explainMs: explained.executionMs,
        floorBuffers: fromFloor.floor.buffers,
        floorMs: fromFloor.floor.executionMs,
        walkMs: fromFloor.walkMs,
        readP50: percentile(c.readMs, 50),
        pgCpuPer1000: per1000(pgNow - last.pg),
        serverCpuPer1000: per1000(serverNow - last.server),
        benchCpuPer1000: per1000(benchNow - last.bench),
        vacuums: scraped.vacuums - last.vacuums,
        load1: loadavg()[0]!,
      });
      const iv = intervals.at(-1)!;
      ctx.log(
        `  horizon ${phase} ${fmt(iv.from)}–${fmt(iv.to)} s: offered ${fmt(iv.offeredPerS)}, completed ${fmt(iv.completedPerS)} jobs/s; ` +
          `claim p50 ${fmt(iv.claimP50)} p99 ${fmt(iv.claimP99)} ms; pickup p99 ${fmt(iv.pickupP99)} ms; backlog ${iv.readyBacklog}; ` +
          `jobs ${fmt(iv.jobsBytes / 2 ** 20)} MiB, ready idx ${fmt(iv.readyIndexBytes / 2 ** 20)} MiB, dead ${iv.deadRows}; ` +
          `EXPLAIN ${fmt(iv.explainBuffers)} buffers ${fmt(iv.explainMs)} ms, from a floor ${fmt(iv.floorBuffers)} / ${fmt(iv.floorMs)} ms (walk ${fmt(iv.walkMs)} ms); ` +
          `reader count(*) p50 ${fmt(iv.readP50)} ms; PG ${fmt(iv.pgCpuPer1000)} ms/1k jobs; load ${fmt(iv.load1)}`,
      );
      last = { at, pg: pgNow, server: serverNow, bench: benchNow, vacuums: scraped.vacuums };
    };

    const fineTimer = setInterval(() => {
      const at = elapsed();
      sizes(admin)
        .then((s) =>
          fine.push({
            t: Math.round(at * 10) / 10,
            phase: PHASES.indexOf(phase),
            acked: counters.totalAcked,
            backlog: counters.totalEnqueued - counters.totalClaimed,
            jobsMiB: s.jobsBytes / 2 ** 20,
            readyIdxMiB: s.readyIndexBytes / 2 ** 20,
            deadRows: s.deadRows,
            liveRows: s.liveRows,
          }),
        )
        .catch(() => {});
    }, 5_000);

    // Phases end on a fixed schedule from t0, whatever the switching between them took.
    let phaseEnd = 0;
    const runPhase = async (p: Phase, seconds: number) => {
      phase = p;
      phaseEnd += seconds;
      const end = phaseEnd;
      while (last.at < end - 0.5) {
        const next = Math.min(end, last.at + opts.intervalSeconds);
        await new Promise((r) => setTimeout(r, Math.max(0, (next - elapsed()) * 1000)));
        if (errors.length > 0) throw errors[0];
        await closeInterval();
      }
    };

    try {
      ctx.log(
        `  horizon: ${opts.rate} jobs/s offered; clean ${opts.cleanSeconds} s, hold ${opts.holdSeconds} s, recovery ${opts.recoverySeconds} s`,
      );
      await runPhase('clean', opts.cleanSeconds);
      if (opts.hold === 'readers') {
        readers = await startReaders((ms) => counters.readMs.push(ms));
        ctx.log(`  horizon: ${READERS} REPEATABLE READ readers of baton.jobs running`);
        await runPhase('hold', opts.holdSeconds);
        await readers.stop();
        readers = undefined;
        ctx.log('  horizon: readers ended');
      } else {
        holder = new pg.Client({
          connectionString: databaseUrl(DATABASES.baton),
          application_name: 'horizon-hold',
        });
        await holder.connect();
        await holder.query('SET idle_in_transaction_session_timeout = 0');
        await holder.query('BEGIN');
        const xid = await holder.query('SELECT txid_current() AS xid');
        ctx.log(`  horizon: holding transaction ${xid.rows[0].xid} open`);
        await runPhase('hold', opts.holdSeconds);
        await holder.query('ROLLBACK');
        await holder.end();
        holder = undefined;
        ctx.log('  horizon: transaction ended');
      }
      await runPhase('recovery', opts.recoverySeconds);
    } finally {
      clearInterval(fineTimer);
      stopProducing = true;
      await producer;
      // Drain: let the workers finish what was enqueued (bounded), then stop them.
      const deadline = Date.now() + 120_000;
      while ((outstanding > 0 || counters.totalAcked < counters.totalEnqueued) && Date.now() < deadline) {
        if (errors.length > 0) break;
        await new Promise((r) => setTimeout(r, 100));
      }
      stopWorking = true;
      await Promise.all(workers);
      await explainClient.end();
    }
    if (errors.length > 0) throw errors[0];

    // Nothing lost, nothing handed out twice (the warm-up job is acked by the workers too).
    const left = await admin.query<{ n: string }>(`SELECT count(*) AS n FROM baton.jobs WHERE queue = $1`, [
      QUEUE,
    ]);
    const integrity = {
      enqueued: counters.totalEnqueued,
      claimed: claimedIds.size,
      acked: ackedIds.size,
      duplicateClaims,
      liveLeft: Number(left.rows[0]!.n),
    };
    ctx.log(`  horizon: integrity ${JSON.stringify(integrity)}`);
    return report(opts, intervals, fine, integrity, settings.rows[0]);
  } finally {
    if (holder) await holder.end().catch(() => {});
    await readers?.stop().catch(() => {});
    client.close();
    await admin.end();
    await ctx.stopExtra(server);
  }
}

function report(
  opts: HorizonOptions,
  intervals: Interval[],
  fine: Record<string, number>[],
  integrity: { enqueued: number; claimed: number; acked: number; duplicateClaims: number; liveLeft: number },
  settings: { autovacuum: string; naptime: string; version: string },
): ScenarioResult {
  const of = (p: Phase) => intervals.filter((i) => i.phase === p);
  const metric = (
    id: string,
    title: string,
    unit: string,
    better: 'higher' | 'lower',
    f: (i: Interval) => number,
  ): Metric => ({
    id: `horizon.${id}`,
    title,
    unit,
    better,
    series: Object.fromEntries(PHASES.map((p) => [p, of(p).map(f)])),
    ratios: false,
  });
  const mib = (b: number) => b / 2 ** 20;
  const metrics = [
    metric('completed', 'Completed (acked) per interval', 'jobs/s', 'higher', (i) => i.completedPerS),
    metric(
      'claim-p50',
      'Claim latency p50 (claims that do not wait, HTTP)',
      'ms',
      'lower',
      (i) => i.claimP50,
    ),
    metric(
      'claim-p99',
      'Claim latency p99 (claims that do not wait, HTTP)',
      'ms',
      'lower',
      (i) => i.claimP99,
    ),
    metric(
      'pickup-p99',
      'Pickup latency p99 (enqueue answered → claim answered)',
      'ms',
      'lower',
      (i) => i.pickupP99,
    ),
    metric('backlog', 'Ready backlog at the end of each interval', 'jobs', 'lower', (i) => i.readyBacklog),
    metric('jobs-size', 'baton.jobs heap size (pg_relation_size)', 'MiB', 'lower', (i) => mib(i.jobsBytes)),
    metric('ready-size', 'jobs_ready_idx size (pg_relation_size)', 'MiB', 'lower', (i) =>
      mib(i.readyIndexBytes),
    ),
    metric(
      'explain-buffers',
      'Buffers an EXPLAIN claim of 50 touches',
      'buffers',
      'lower',
      (i) => i.explainBuffers,
    ),
    metric(
      'pg-cpu',
      'PostgreSQL CPU per 1,000 completed jobs (whole server, /proc)',
      'ms',
      'lower',
      (i) => i.pgCpuPer1000,
    ),
    metric(
      'server-cpu',
      'Baton server CPU per 1,000 completed jobs',
      'ms',
      'lower',
      (i) => i.serverCpuPer1000,
    ),
  ];

  const clean = of('clean');
  const hold = of('hold');
  const recovery = of('recovery');
  const cleanRate = median(clean.map((i) => i.completedPerS));
  const cleanP99 = median(clean.map((i) => i.claimP99));
  const worstHold = Math.min(...hold.map((i) => i.completedPerS));
  const worstHoldP99 = Math.max(...hold.map((i) => i.claimP99));
  const cleanReady = clean.at(-1)?.readyIndexBytes ?? Number.NaN;
  const holdReady = Math.max(...hold.map((i) => i.readyIndexBytes));
  const firstRecovery = recovery[0];
  const checks: Check[] = [
    {
      target: 'every hold interval completes ≥ 90% of the clean phase (median interval)',
      met: worstHold >= 0.9 * cleanRate,
      detail: `worst hold interval ${fmt(worstHold)} vs clean ${fmt(cleanRate)} jobs/s: ${fmt(worstHold / cleanRate)}×`,
    },
    {
      target: 'claim p99 during the hold ≤ 2× the clean phase',
      met: worstHoldP99 <= 2 * cleanP99,
      detail: `worst hold interval p99 ${fmt(worstHoldP99)} vs clean ${fmt(cleanP99)} ms: ${fmt(worstHoldP99 / cleanP99)}×`,
    },
    {
      target:
        'ready index stays bounded (largest during the hold ≤ 2× its size at the end of the clean phase)',
      met: holdReady <= 2 * cleanReady,
      detail: `${fmt(mib(holdReady))} vs ${fmt(mib(cleanReady))} MiB`,
    },
    {
      target: 'throughput back in the first recovery interval (≥ 90% of clean)',
      met: firstRecovery !== undefined && firstRecovery.completedPerS >= 0.9 * cleanRate,
      detail: firstRecovery
        ? `${fmt(firstRecovery.completedPerS)} jobs/s (it also works off the hold's backlog)`
        : 'no recovery interval',
    },
    {
      target: 'nothing lost, nothing handed out twice',
      met:
        integrity.duplicateClaims === 0 &&
        integrity.acked === integrity.claimed &&
        integrity.acked >= integrity.enqueued &&
        integrity.liveLeft === 0,
      detail: `enqueued ${integrity.enqueued}, claimed ${integrity.claimed} distinct, acked ${integrity.acked}, claimed twice ${integrity.duplicateClaims}, left in baton.jobs ${integrity.liveLeft}`,
    },
  ];

  const head =
    '| phase | s | offered/s | done/s | claim p50 / p99 ms | pickup p50 / p99 ms | backlog | jobs MiB | ready idx MiB | dead rows | EXPLAIN buffers / ms | from a floor | walk ms | reader ms | PG CPU ms/1k | server ms/1k | vacuums | load |';
  const table = [
    head,
    `|${head
      .split('|')
      .slice(1, -1)
      .map(() => ' --- ')
      .join('|')}|`,
    ...intervals.map(
      (i) =>
        `| ${i.phase} | ${fmt(i.from)}–${fmt(i.to)} | ${fmt(i.offeredPerS)} | ${fmt(i.completedPerS)} | ${fmt(i.claimP50)} / ${fmt(i.claimP99)} | ${fmt(i.pickupP50)} / ${fmt(i.pickupP99)} | ${i.readyBacklog} | ${fmt(mib(i.jobsBytes))} | ${fmt(mib(i.readyIndexBytes))} | ${i.deadRows} | ${fmt(i.explainBuffers)} / ${fmt(i.explainMs)} | ${fmt(i.floorBuffers)} / ${fmt(i.floorMs)} | ${fmt(i.walkMs)} | ${fmt(i.readP50)} | ${fmt(i.pgCpuPer1000)} | ${fmt(i.serverCpuPer1000)} | ${i.vacuums} | ${fmt(i.load1)} |`,
    ),
  ];

  return {
    id: 'held-horizon',
    title: 'A held transaction (xmin horizon) at a steady offered load',
    setup: [
      `${opts.rate.toLocaleString('en-US')} jobs/s offered over HTTP: a batch of ${Math.round((opts.rate * TICK_MS) / 1000)} every ${TICK_MS} ms (open loop); ${WORKERS} workers claim ${CLAIM} (first without waiting; when that finds nothing, long-poll 1 s) and batch-ack.`,
      `Phases: clean ${opts.cleanSeconds} s, hold ${opts.holdSeconds} s (${
        opts.hold === 'readers'
          ? `${READERS} sessions: BEGIN ISOLATION LEVEL REPEATABLE READ, then SELECT count(*) FROM baton.jobs every ${READ_EVERY_MS} ms`
          : 'another session: BEGIN; SELECT txid_current(); then idle in that transaction'
      }), recovery ${opts.recoverySeconds} s after its ROLLBACK; figures per ${opts.intervalSeconds} s interval.`,
      `Baton server in its own process with the maintenance leader on at its defaults (5 s tick, vacuum duty at 10,000 dead rows). PostgreSQL ${settings.version}, autovacuum ${settings.autovacuum} (naptime ${settings.naptime}).`,
      'Claim latency: HTTP round trip of the claims that do not wait (wait_ms 0), empty ones included. Pickup: enqueue answered → claim answered, per job. Backlog and in-flight: counted by the load generator.',
      'PostgreSQL CPU: whole server from /proc (postmaster utime+stime+cutime+cstime plus live children; bench/postgres-cpu.ts), per 1,000 jobs completed in the interval; other users of the server count too (see the load column).',
      "EXPLAIN: (ANALYZE, BUFFERS) of the server's claim of 50 at the end of each interval, in a transaction rolled back: from the head of the ready index, and from the floor the leader's walk finds now (src/maintenance/claim-floors.ts; the server claims from a floor only while readers keep the ring from being truncated). Walk: that walk's execution time. Reader: the median of the readers' count(*).",
    ],
    metrics,
    notes: ['Per interval:', '', ...table],
    checks,
    details: { options: opts, intervals, fine, integrity },
  };
}
