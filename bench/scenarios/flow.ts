import { Kysely, PostgresDialect } from 'kysely';
import type pg from 'pg';
import { createDatabase, type DatabaseHandle, type Db } from '../../src/db/database.js';
import type { Database } from '../../src/db/schema.js';
import { type AckItem, ackBriefEach } from '../../src/jobs/ack.js';
import { claimJobs } from '../../src/jobs/claim/claim.js';
import { noLog } from '../../src/logger.js';
import { GroupStatsDuty } from '../../src/maintenance/group-stats.js';
import type { BenchContext } from '../context.js';
import { DATABASES, databaseUrl } from '../databases.js';
import { work } from '../load/baton-load.js';
import type { HttpClient } from '../load/http-client.js';
import { produceInBatches } from '../load/produce.js';
import type { Check, Metric, ScenarioResult } from '../report.js';
import { fmt, median, percentile, ratios } from '../stats.js';

/**
 * What flow control costs, and what fair sharing gives (docs/benchmarks.md, "Results against the
 * targets", the flow rows). Four parts, each comparing Baton with itself in the same run:
 *
 * 1. Claim cost with groups. One queue without groups and one per group count (10, 100, 1,000,
 *    10,000), each holding the same number of ready jobs (1,000,000 in the full run; with 10,000
 *    groups that is 100 per group), all in the ring at once, written straight into baton.jobs (each
 *    row in its id's slot, as enqueue puts it), VACUUM ANALYZEd and checkpointed. The leader's
 *    group-stats duty then runs, as on a live server, to mark the grouped queues (what sends their
 *    claims to the grouped claim, src/jobs/grouped-claim.ts) and count their groups. Rounds of
 *    bursts, in process (src/jobs/claim.ts, claimJobs) and over HTTP in alternating order; a burst is
 *    sequential claims of 10 on one connection, the queues interleaved claim by claim, each claim
 *    acked at once (untimed).
 * 2. Batched processing (claim 100, batch ack, as scenario 1) of a queue whose limits are all set
 *    but never reached, against a queue without limits; alternating, several rounds.
 * 3. Single-job enqueue with a group (one group for all; a thousand groups in turn) against without.
 * 4. Fairness: group A enqueues 20,000 jobs, a claimer takes 10 at a time, then group B enqueues
 *    100; how many jobs are claimed after B's arrive until the last of B's is, and Jain's index of
 *    the two groups' shares per claim while both have jobs.
 */

const CLAIM = 10;
const GROUP_COUNTS = [10, 100, 1_000, 10_000];
const PLAIN = 'no groups';
const BATCH = 100;
const FAIR_A = 20_000;
const FAIR_B = 100;
/** Claims of A alone before B's jobs arrive (so the turn is somewhere in the middle, as in life). */
const FAIR_LEAD_CLAIMS = 20;

const groupLabel = (g: number) => `${g.toLocaleString('en-US')} groups`;
const costQueue = (groups: number) => (groups === 0 ? 'flow-cost-plain' : `flow-cost-g${groups}`);

/**
 * `n` ready jobs of `queue` straight into the ring, each in its id's slot; with `groups` > 0 job i
 * goes to group i mod groups (so every group's jobs are spread over the ids, as when tenants enqueue
 * side by side).
 */
async function seedReady(admin: pg.Pool, queue: string, n: number, groups: number): Promise<void> {
  await admin.query(
    `INSERT INTO baton.jobs (slot, id, queue, group_key, state, run_at, max_attempts, payload)
     SELECT baton.job_slot(id), id, $1,
            CASE WHEN $3::int = 0 THEN '' ELSE 'tenant-' || lpad((g % $3::int)::text, 5, '0') END,
            'ready', now(), 5, jsonb_build_object('i', g)
     FROM (SELECT nextval('baton.jobs_id_seq') AS id, g FROM generate_series(1, $2::int) g) s`,
    [queue, n, groups],
  );
}

type CostSeries = 'in process' | 'HTTP';
const COST_SERIES: CostSeries[] = ['in process', 'HTTP'];

/** What each statement of a claim is, by its text (src/jobs/claim.ts, src/jobs/flow-claim.ts). */
const STATEMENT_KINDS: [string, RegExp][] = [
  ['begin', /^\s*begin/i],
  ['commit', /^\s*commit/i],
  ['queue lock', /pg_advisory_xact_lock/],
  ['read limits', /LEFT JOIN baton\.flow_state fs ON fs\.queue = q\.name/],
  ['walk groups', /WITH RECURSIVE walk/],
  ['claim statement', /WITH (RECURSIVE )?settings AS/],
  ['record turn', /INSERT INTO baton\.flow_state/],
];
const kindOf = (text: string) => STATEMENT_KINDS.find(([, re]) => re.test(text))?.[0] ?? 'other';

interface CostPart {
  /** Label (PLAIN or "N groups") -> series -> per-round p50 / p99. */
  p50: Record<string, Record<CostSeries, number[]>>;
  p99: Record<string, Record<CostSeries, number[]>>;
  groupsCounted: Record<string, number>;
  seedSeconds: number;
  /** Label -> statement kind -> median ms per in-process claim (0 when a claim ran none). */
  statements: Record<string, Record<string, number>>;
}

async function claimCost(ctx: BenchContext, handle: DatabaseHandle): Promise<CostPart> {
  const { client: http, admin } = await ctx.baton();
  const n = ctx.sizes.flowReadyJobs;
  const { claimSamples: samples, claimRounds: rounds } = ctx.sizes;
  const configs = [0, ...GROUP_COUNTS];
  const label = (g: number) => (g === 0 ? PLAIN : groupLabel(g));
  await admin.query('TRUNCATE baton.jobs, baton.scheduled_jobs, baton.job_history');
  const t0 = performance.now();
  for (const groups of configs) {
    await admin.query(
      `INSERT INTO baton.queues (name, auto_created) VALUES ($1, false) ON CONFLICT (name) DO NOTHING`,
      [costQueue(groups)],
    );
    ctx.log(`  flow claim cost: seeding ${n.toLocaleString('en-US')} ready jobs, ${label(groups)}`);
    await seedReady(admin, costQueue(groups), n, groups);
  }
  await admin.query('VACUUM ANALYZE baton.jobs');
  // The seed's gigabytes of WAL and dirty pages are written out now, untimed, rather than by a
  // checkpoint running beside the timed rounds (rounds swung 0.9–2× between runs without it).
  await admin.query('CHECKPOINT');
  const seedSeconds = (performance.now() - t0) / 1000;
  // The leader's duty, as on a live server: its first run marks the queues grouped, the next counts
  // their groups into baton.group_stats.
  const maintenance = createDatabase(
    databaseUrl(DATABASES.baton),
    { poolSize: 1, statementTimeoutMs: 600_000, connectTimeoutMs: 10_000 },
    noLog,
    'maintenance',
  );
  try {
    const duty = new GroupStatsDuty(maintenance.db);
    await duty.runOnce();
    await duty.runOnce();
  } finally {
    await maintenance.close();
  }
  const counted = await admin.query<{ queue: string; grouped: boolean; groups: number }>(
    `SELECT q.name AS queue, q.grouped, (SELECT count(*)::int FROM baton.group_stats s WHERE s.queue = q.name) AS groups
     FROM baton.queues q WHERE q.name LIKE 'flow-cost-%'`,
  );
  const groupsCounted: Record<string, number> = {};
  for (const groups of configs) {
    const row = counted.rows.find((r) => r.queue === costQueue(groups));
    if (!row || row.grouped !== groups > 0 || (groups > 0 && row.groups !== groups))
      throw new Error(
        `${costQueue(groups)}: expected grouped=${groups > 0} with ${groups} groups, got ${JSON.stringify(row)}`,
      );
    groupsCounted[label(groups)] = row.groups;
  }
  ctx.log(
    `  flow claim cost: ${configs.length} queues seeded and vacuumed in ${fmt(seedSeconds)} s, groups counted`,
  );

  // The in-process claims run on a Kysely over the same pool that times each statement it sends.
  let perClaim: Record<string, number> = {};
  const timed: Db = new Kysely<Database>({
    dialect: new PostgresDialect({ pool: handle.pool }),
    log: (event) => {
      const kind = kindOf(event.query.sql);
      perClaim[kind] = (perClaim[kind] ?? 0) + event.queryDurationMillis;
    },
  });
  const statementSamples: Record<string, Record<string, number>[]> = {};
  for (const groups of configs) statementSamples[label(groups)] = [];
  /** One timed claim of `queue` (its jobs acked at once, untimed); ms. */
  const sample = async (queue: string, series: CostSeries, label: string): Promise<number> => {
    perClaim = {};
    const t = performance.now();
    let jobs: { id: string; lease_token: string }[];
    if (series === 'HTTP') {
      const r = await http.post(`/v1/queues/${queue}/claim`, { max_jobs: CLAIM, lease_ms: 60_000 });
      if (r.status !== 200) throw new Error(`claim: HTTP ${r.status}`);
      jobs = r.body.jobs;
    } else {
      jobs = await claimJobs(timed, { queue, maxJobs: CLAIM, leaseMs: 60_000, defaultLeaseMs: 30_000 });
      statementSamples[label]!.push(perClaim);
    }
    const ms = performance.now() - t;
    if (jobs.length !== CLAIM) throw new Error(`${queue} ${series}: claimed ${jobs.length} of ${CLAIM}`);
    const items: AckItem[] = jobs.map((j) => ({ id: String(j.id), leaseToken: j.lease_token }));
    const acked = await ackBriefEach(handle.db, items);
    if (acked.some((a) => a === undefined)) throw new Error(`${queue}: an ack failed`);
    return ms;
  };
  /**
   * `samples` claims of every queue, interleaved claim by claim (the queue that goes first rotates), so
   * that whatever drifts during a burst (dead index entries at the heads of the ranges, the page cache,
   * the machine's other load) weighs on every queue alike: with a burst per queue in turn, rounds swung
   * 0.8–2× and the ratios flipped between runs.
   */
  const burst = async (series: CostSeries): Promise<number[][]> => {
    const out: number[][] = configs.map(() => []);
    for (let i = 0; i < samples; i++) {
      for (let k = 0; k < configs.length; k++) {
        const at = (i + k) % configs.length;
        const groups = configs[at]!;
        out[at]!.push(await sample(costQueue(groups), series, label(groups)));
      }
    }
    return out;
  };

  const p50: CostPart['p50'] = {};
  const p99: CostPart['p99'] = {};
  for (const g of configs) {
    p50[label(g)] = { 'in process': [], HTTP: [] };
    p99[label(g)] = { 'in process': [], HTTP: [] };
  }
  for (let round = 0; round < rounds; round++) {
    for (const series of round % 2 === 0 ? COST_SERIES : [...COST_SERIES].reverse()) {
      const latencies = await burst(series);
      configs.forEach((groups, at) => {
        p50[label(groups)]![series].push(percentile(latencies[at]!, 50));
        p99[label(groups)]![series].push(percentile(latencies[at]!, 99));
      });
    }
    for (const groups of configs) {
      ctx.log(
        `    round ${round + 1}, ${label(groups)}: p50 in process ${fmt(p50[label(groups)]!['in process'].at(-1)!)} ms, HTTP ${fmt(p50[label(groups)]!.HTTP.at(-1)!)} ms`,
      );
    }
  }
  const statements: CostPart['statements'] = {};
  for (const [l, claims] of Object.entries(statementSamples)) {
    const kinds = [...new Set(claims.flatMap((c) => Object.keys(c)))];
    statements[l] = Object.fromEntries(kinds.map((k) => [k, median(claims.map((c) => c[k] ?? 0))]));
  }
  // Gigabytes of seeded rows: gone before the next part (and before the next run's DROP DATABASE).
  await admin.query('TRUNCATE baton.jobs, baton.scheduled_jobs, baton.job_history, baton.group_stats');
  await admin.query(`DELETE FROM baton.queues WHERE name LIKE 'flow-cost-%'`);
  return { p50, p99, groupsCounted, seedSeconds, statements };
}

async function setQueue(baseUrl: string, queue: string, body: unknown): Promise<void> {
  const r = await fetch(`${baseUrl}/v1/queues/${encodeURIComponent(queue)}`, {
    method: 'PUT',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  if (r.status !== 200 && r.status !== 201)
    throw new Error(`PUT queue ${queue}: HTTP ${r.status} ${await r.text()}`);
}

/** Limits a run of this size never reaches (the largest each setting accepts, src/jobs/limits.ts). */
const UNREACHED_LIMITS = {
  concurrency_limit: 100_000,
  rate_limit: { limit: 1_000_000, period_ms: 1_000 },
  group_concurrency_limit: 100_000,
  group_rate_limit: { limit: 1_000_000, period_ms: 1_000 },
};

type Arm = 'no limits' | 'limits set, never reached';
const ARMS: Arm[] = ['no limits', 'limits set, never reached'];

/** Enqueue over HTTP; `group(i)` names job i's group (undefined: none). */
async function enqueueJobs(
  client: HttpClient,
  queue: string,
  total: number,
  batchSize: number,
  concurrency: number,
  group: (i: number) => string | undefined,
): Promise<void> {
  const q = encodeURIComponent(queue);
  const job = (i: number) => {
    const g = group(i);
    return g === undefined ? { payload: { i } } : { payload: { i }, group: g };
  };
  await produceInBatches(total, batchSize, concurrency, async (start, n) => {
    const r =
      batchSize === 1
        ? await client.post(`/v1/queues/${q}/jobs`, job(start))
        : await client.post(`/v1/queues/${q}/jobs/batch`, {
            jobs: Array.from({ length: n }, (_, k) => job(start + k)),
          });
    if (r.status !== 201)
      throw new Error(`enqueue: HTTP ${r.status} ${JSON.stringify(r.body).slice(0, 300)}`);
  });
}

async function batchedProcessing(ctx: BenchContext): Promise<Record<Arm, number[]>> {
  const { server, client, admin } = await ctx.baton();
  const { batchedJobs: n, batchedWorkers: workers, batchedProducers: producers, rounds } = ctx.sizes;
  const out: Record<Arm, number[]> = { 'no limits': [], 'limits set, never reached': [] };
  for (let round = 0; round < rounds; round++) {
    for (const arm of round % 2 === 0 ? ARMS : [...ARMS].reverse()) {
      const queue = `flow-batched-${arm === 'no limits' ? 'plain' : 'limited'}-${round}`;
      await admin.query('TRUNCATE baton.job_history');
      if (arm !== 'no limits') await setQueue(server.url, queue, UNREACHED_LIMITS);
      await enqueueJobs(client, queue, n, BATCH, producers, () => undefined);
      await admin.query('VACUUM ANALYZE');
      const t0 = performance.now();
      const lastAck = await work(client, queue, { workers, claimSize: BATCH, total: n, waitMs: 50 });
      const rate = n / ((lastAck - t0) / 1000);
      out[arm].push(rate);
      ctx.log(`  flow batched round ${round + 1}: ${arm} ${Math.round(rate)} jobs/s`);
    }
  }
  return out;
}

type EnqueueArm = 'no group' | 'one group' | '1,000 groups';
const ENQUEUE_ARMS: EnqueueArm[] = ['no group', 'one group', '1,000 groups'];
const groupOf: Record<EnqueueArm, (i: number) => string | undefined> = {
  'no group': () => undefined,
  'one group': () => 'tenant-1',
  '1,000 groups': (i) => `tenant-${i % 1000}`,
};

async function singleEnqueue(ctx: BenchContext): Promise<Record<EnqueueArm, number[]>> {
  const { client, admin } = await ctx.baton();
  const { enqueueSingleJobs: n, enqueueConcurrency: concurrency } = ctx.sizes;
  // Short runs on a noisy machine: twice the rounds of the other parts.
  const rounds = 2 * ctx.sizes.rounds;
  const out: Record<EnqueueArm, number[]> = { 'no group': [], 'one group': [], '1,000 groups': [] };
  for (let round = 0; round < rounds; round++) {
    for (const arm of round % 2 === 0 ? ENQUEUE_ARMS : [...ENQUEUE_ARMS].reverse()) {
      await admin.query('TRUNCATE baton.jobs, baton.job_history');
      await admin.query('VACUUM ANALYZE baton.jobs, baton.queues');
      const queue = `flow-enqueue-${ENQUEUE_ARMS.indexOf(arm)}-${round}`;
      const t0 = performance.now();
      await enqueueJobs(client, queue, n, 1, concurrency, groupOf[arm]);
      const rate = n / ((performance.now() - t0) / 1000);
      out[arm].push(rate);
      ctx.log(`  flow enqueue round ${round + 1}: ${arm} ${Math.round(rate)} jobs/s`);
    }
  }
  await admin.query('TRUNCATE baton.jobs, baton.job_history');
  return out;
}

interface Fairness {
  /** Claims (of 10) from B's arrival until the claim that took the last of B's jobs, inclusive. */
  claimsUntilBDone: number;
  /** Jobs claimed in those claims. */
  jobsUntilBDone: number;
  /** B's jobs per claim over those claims. */
  bPerClaim: number[];
  /** Jain's index of (A's jobs, B's jobs) per claim while both had ready jobs: minimum and mean. */
  jainMin: number;
  jainMean: number;
  /** Where B's last job would have been claimed in a queue without groups (first in, first out). */
  fifoJobs: number;
}

const jain = (x: number[]) =>
  x.reduce((a, b) => a + b, 0) ** 2 / (x.length * x.reduce((a, b) => a + b * b, 0));

async function fairness(ctx: BenchContext): Promise<Fairness> {
  const { client, admin } = await ctx.baton();
  const queue = 'flow-fair';
  await admin.query('TRUNCATE baton.jobs, baton.job_history');
  await enqueueJobs(client, queue, FAIR_A, BATCH, 2, () => 'a');
  const claim = async () => {
    const r = await client.post(`/v1/queues/${queue}/claim`, { max_jobs: CLAIM, lease_ms: 60_000 });
    if (r.status !== 200) throw new Error(`claim: HTTP ${r.status}`);
    const jobs: { id: string; lease_token: string; group: string | null }[] = r.body.jobs;
    if (jobs.length > 0) {
      const a = await client.post('/v1/jobs/ack', {
        acks: jobs.map((j) => ({ id: j.id, lease_token: j.lease_token })),
      });
      if (a.status !== 200 || a.body.failed > 0) throw new Error(`ack: HTTP ${a.status}`);
    }
    return jobs;
  };
  for (let i = 0; i < FAIR_LEAD_CLAIMS; i++) await claim();
  const aLeft = FAIR_A - FAIR_LEAD_CLAIMS * CLAIM;
  await enqueueJobs(client, queue, FAIR_B, BATCH, 1, () => 'b');
  let bClaimed = 0;
  let jobs = 0;
  const bPerClaim: number[] = [];
  const shares: number[] = [];
  while (bClaimed < FAIR_B) {
    const got = await claim();
    if (got.length === 0) throw new Error('fairness: a claim came back empty with jobs ready');
    const b = got.filter((j) => j.group === 'b').length;
    bPerClaim.push(b);
    shares.push(jain([got.length - b, b]));
    bClaimed += b;
    jobs += got.length;
    if (bPerClaim.length > FAIR_A / CLAIM) throw new Error('fairness: B never finished');
  }
  // The last claim may have found B short of a full share: the index while both had jobs excludes it.
  const both = shares.slice(0, -1);
  await admin.query('TRUNCATE baton.jobs, baton.job_history');
  return {
    claimsUntilBDone: bPerClaim.length,
    jobsUntilBDone: jobs,
    bPerClaim,
    jainMin: Math.min(...(both.length ? both : shares)),
    jainMean: (both.length ? both : shares).reduce((a, b) => a + b, 0) / (both.length || shares.length),
    fifoJobs: aLeft + FAIR_B,
  };
}

/** A part's share of the scenario's result. */
interface PartReport {
  setup: string[];
  metrics: Metric[];
  checks: Check[];
  notes: string[];
  details: Record<string, unknown>;
}

/** Target: median / median ≥ 90%; the detail also gives the median of the paired (per-round) ratios. */
function atLeast90(target: string, arm: number[], base: number[], unit: string): Check {
  const r = median(arm) / median(base);
  const paired = ratios(arm, base);
  return {
    target,
    met: r >= 0.9,
    detail: `${fmt(median(arm))} vs ${fmt(median(base))} ${unit}: ${fmt(r * 100)}% (medians); median of per-round ratios ${fmt(median(paired) * 100)}% (${paired.map((x) => `${fmt(x * 100)}%`).join(', ')})`,
  };
}

async function costReport(ctx: BenchContext): Promise<PartReport> {
  const handle = createDatabase(
    databaseUrl(DATABASES.baton),
    { poolSize: 1, statementTimeoutMs: 60_000, connectTimeoutMs: 10_000 },
    noLog,
    'requests',
  );
  let cost: CostPart;
  try {
    cost = await claimCost(ctx, handle);
  } finally {
    await handle.close();
  }
  const configs = [PLAIN, ...GROUP_COUNTS.map(groupLabel)];
  const n = ctx.sizes.flowReadyJobs.toLocaleString('en-US');
  const where = (s: CostSeries) => (s === 'HTTP' ? 'http' : 'function');
  const metrics: Metric[] = [
    ...COST_SERIES.map(
      (s): Metric => ({
        id: `flow.claim.${where(s)}`,
        title: `Claim of ${CLAIM} with ${n} ready jobs in the queue, ${s === 'HTTP' ? 'over HTTP' : 'claim function in process'} (per-round p50)`,
        unit: 'ms',
        better: 'lower',
        ratios: false,
        series: Object.fromEntries(configs.map((c) => [c, cost.p50[c]![s]])),
      }),
    ),
    ...COST_SERIES.map(
      (s): Metric => ({
        id: `flow.claim.${where(s)}.p99`,
        title: `The same, ${s === 'HTTP' ? 'over HTTP' : 'in process'} (per-round p99)`,
        unit: 'ms',
        better: 'lower',
        ratios: false,
        series: Object.fromEntries(configs.map((c) => [c, cost.p99[c]![s]])),
      }),
    ),
  ];
  const p50 = (c: string, s: CostSeries) => median(cost.p50[c]![s]);
  const checks: Check[] = [];
  const largest = groupLabel(GROUP_COUNTS.at(-1)!);
  const smallest = groupLabel(GROUP_COUNTS[0]!);
  for (const s of COST_SERIES) {
    const r = p50(largest, s) / p50(PLAIN, s);
    const perRound = ratios(cost.p50[largest]![s], cost.p50[PLAIN]![s]);
    checks.push({
      target: `claim p50 (${s}) with ${largest} ≤ 1.5× the queue without groups, same ${n} ready jobs`,
      met: r <= 1.5,
      detail: `${fmt(p50(largest, s))} vs ${fmt(p50(PLAIN, s))} ms: ${fmt(r)}× (medians of per-round p50; per round ${perRound.map((x) => fmt(x)).join(', ')})`,
    });
    const grouped = GROUP_COUNTS.map((g) => p50(groupLabel(g), s));
    const flat = Math.max(...grouped) / Math.min(...grouped);
    checks.push({
      target: `claim p50 (${s}) flat from ${smallest} to ${largest} (largest/smallest ≤ 1.2×)`,
      met: flat <= 1.2,
      detail: `${GROUP_COUNTS.map((g, i) => `${groupLabel(g)} ${fmt(grouped[i]!)}`).join(', ')} ms: ${fmt(flat)}×`,
    });
  }
  const kinds = [...STATEMENT_KINDS.map(([k]) => k), 'other'];
  return {
    setup: [
      `Claim cost: ${configs.length} queues in the ring at once, each with ${n} ready jobs written straight into baton.jobs (job i in group i mod G: ${GROUP_COUNTS.map((g) => `${groupLabel(g)} × ${(ctx.sizes.flowReadyJobs / g).toLocaleString('en-US')}`).join(', ')}), VACUUM ANALYZE and CHECKPOINT, then the leader's group-stats duty (marks the grouped queues, counts their groups); seeding took ${fmt(cost.seedSeconds)} s. ${ctx.sizes.claimRounds} rounds, each a burst in process (claimJobs on a one-connection pool of the server's request role) and one over HTTP, series in alternating order; a burst is ${ctx.sizes.claimSamples} sequential claims of ${CLAIM} of every queue, interleaved claim by claim, each claim acked at once (untimed).`,
    ],
    metrics,
    checks,
    notes: [
      `Where an in-process claim's time goes: median ms per claim of each statement (as the pool's client sees it, round trip included; BEGIN and COMMIT are statements too):`,
      '',
      `| queue | ${kinds.join(' | ')} |`,
      `| --- | ${kinds.map(() => '---').join(' | ')} |`,
      ...configs.map(
        (c) =>
          `| ${c} | ${kinds.map((k) => (cost.statements[c]?.[k] === undefined ? '' : fmt(cost.statements[c]![k]!))).join(' | ')} |`,
      ),
      '',
      `Groups counted by the duty: ${Object.entries(cost.groupsCounted)
        .map(([k, v]) => `${k}: ${v.toLocaleString('en-US')}`)
        .join(', ')}.`,
    ],
    details: { claimCost: cost },
  };
}

async function batchedReport(ctx: BenchContext): Promise<PartReport> {
  const batched = await batchedProcessing(ctx);
  return {
    setup: [
      `Batched: ${ctx.sizes.rounds} rounds alternating a queue without limits and one with ${JSON.stringify(UNREACHED_LIMITS)}; per run ${ctx.sizes.batchedJobs.toLocaleString('en-US')} jobs enqueued first (batches of ${BATCH}, untimed), VACUUM ANALYZE, then ${ctx.sizes.batchedWorkers} workers claim ${BATCH} → batch ack; jobs/s from the first claim to the last ack.`,
    ],
    metrics: [
      {
        id: 'flow.batched',
        title: `Batched processing: ${ctx.sizes.batchedJobs.toLocaleString('en-US')} jobs, ${ctx.sizes.batchedWorkers} HTTP workers, claim ${BATCH} → batch ack`,
        unit: 'jobs/s',
        better: 'higher',
        ratios: false,
        series: batched,
      },
    ],
    checks: [
      atLeast90(
        'batched processing with limits set but never reached ≥ 90% of the queue without limits',
        batched['limits set, never reached'],
        batched['no limits'],
        'jobs/s',
      ),
    ],
    notes: [],
    details: {},
  };
}

async function enqueueReport(ctx: BenchContext): Promise<PartReport> {
  const enqueued = await singleEnqueue(ctx);
  return {
    setup: [
      `Enqueue: ${2 * ctx.sizes.rounds} rounds alternating no group, one group for every job, and 1,000 groups in turn; POST /v1/queues/{q}/jobs on a fresh queue, table truncated before each run.`,
    ],
    metrics: [
      {
        id: 'flow.enqueue',
        title: `Single-job enqueue: ${ctx.sizes.enqueueSingleJobs.toLocaleString('en-US')} jobs, ${ctx.sizes.enqueueConcurrency} concurrent producers`,
        unit: 'jobs/s',
        better: 'higher',
        ratios: false,
        series: enqueued,
      },
    ],
    checks: (['one group', '1,000 groups'] as EnqueueArm[]).map((arm) =>
      atLeast90(
        `single-job enqueue with groups (${arm}) ≥ 90% of the rate without`,
        enqueued[arm],
        enqueued['no group'],
        'jobs/s',
      ),
    ),
    notes: [],
    details: {},
  };
}

async function fairnessReport(ctx: BenchContext): Promise<PartReport> {
  ctx.log('  flow fairness');
  const fair = await fairness(ctx);
  ctx.log(
    `    B done after ${fair.claimsUntilBDone} claims (${fair.jobsUntilBDone} jobs); Jain min ${fmt(fair.jainMin)}`,
  );
  // docs/flow-control.md's bound: a group of weight w with k ready jobs, total weight W, is done within ⌈k/w⌉·W
  // jobs claimed after its arrival, plus one claim.
  const bound = Math.ceil(FAIR_B / 1) * 2 + CLAIM;
  return {
    setup: [
      `Fairness: group "a" enqueues ${FAIR_A.toLocaleString('en-US')} jobs; one claimer takes ${CLAIM} at a time over HTTP and acks them; after ${FAIR_LEAD_CLAIMS} claims group "b" enqueues ${FAIR_B}; counted from then until B's last job is claimed. Limits off, weights 1.`,
    ],
    metrics: [],
    checks: [
      {
        target: `fairness: all ${FAIR_B} of B's jobs claimed within ${bound} jobs after they arrive (docs/flow-control.md's bound: ⌈k/w⌉·W plus one claim)`,
        met: fair.jobsUntilBDone <= bound,
        detail: `${fair.jobsUntilBDone} jobs in ${fair.claimsUntilBDone} claims of ${CLAIM} (first in, first out: ${fair.fifoJobs.toLocaleString('en-US')}); Jain's index per claim while both had jobs: min ${fmt(fair.jainMin)}, mean ${fmt(fair.jainMean)}`,
      },
    ],
    notes: [`Fairness: B's jobs per claim after they arrived: ${fair.bPerClaim.join(', ')}.`],
    details: { fairness: fair },
  };
}

const PARTS = {
  cost: costReport,
  batched: batchedReport,
  enqueue: enqueueReport,
  fairness: fairnessReport,
} as const;
export const FLOW_PARTS = Object.keys(PARTS);

/** All four parts, or only some (`--flow-parts batched,enqueue`). */
export async function flowControl(ctx: BenchContext, parts: string[] = FLOW_PARTS): Promise<ScenarioResult> {
  const unknown = parts.filter((p) => !(p in PARTS));
  if (unknown.length > 0)
    throw new Error(`unknown flow parts ${unknown.join(', ')}; known: ${FLOW_PARTS.join(', ')}`);
  const reports: PartReport[] = [];
  for (const part of FLOW_PARTS.filter((p) => parts.includes(p))) {
    reports.push(await PARTS[part as keyof typeof PARTS](ctx));
  }
  return {
    id: 'flow',
    title: 'Flow control',
    setup: reports.flatMap((r) => r.setup),
    metrics: reports.flatMap((r) => r.metrics),
    checks: reports.flatMap((r) => r.checks),
    notes: reports.flatMap((r) => r.notes),
    details: Object.assign({}, ...reports.map((r) => r.details)),
  };
}
