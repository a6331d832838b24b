import type { BenchContext } from '../context.js';
import { hotPathMetrics, runHotPathArm } from '../load/hot-path-arm.js';
import type { Check, Metric, ScenarioResult } from '../report.js';
import { fmt, median, percentile, ratios } from '../stats.js';

/**
 * Do unique keys slow the claim path or single-job enqueue? Three arms, interleaved round
 * by round, each with 4 producers sending single-job enqueues and 4 workers claiming one job and
 * acking it, all over HTTP to the measured server:
 * - `plain`: no unique key (the baseline);
 * - `fresh keys`: every enqueue carries a new unique_key (each creates a job and a key row: the
 *   enqueue takes the transaction path that idempotency keys take);
 * - `hot keys (keep)`: enqueues carry one of 20 keys, so nearly every one finds a waiting job and
 *   answers it (200) without inserting.
 * The workers claim from a backlog inserted in SQL before each arm, whose jobs carry unique keys in
 * the two keyed arms (the claim path is the same statement either way: claims never touch the
 * key table, jobs/unique.ts).
 *
 * Short interleaved arms, because this machine is shared and its load drifts by the minute.
 */

const ARM_MS = 20_000;
const WARMUP_MS = 10_000;
const PRODUCERS = 4;
const WORKERS = 4;
const BACKLOG = 50_000;
const HOT_KEYS = 20;
const PLAIN = 'plain';
const FRESH = 'fresh keys';
const HOT = 'hot keys (keep)';
const ARMS = [PLAIN, FRESH, HOT] as const;
type Arm = (typeof ARMS)[number];

interface ArmResult {
  enqueueRate: number;
  enqueueMs: number[];
  claimRate: number;
  claimMs: number[];
  /** Enqueues answered with an existing waiting job (200). */
  kept: number;
}

export async function uniqueKeysScenario(ctx: BenchContext): Promise<ScenarioResult> {
  const { client, admin } = await ctx.baton();
  await admin.query(
    `INSERT INTO baton.queues (name, auto_created) VALUES ('uq-claim', false), ('uq-enq', false)
     ON CONFLICT (name) DO NOTHING`,
  );
  const results: Record<Arm, ArmResult[]> = { [PLAIN]: [], [FRESH]: [], [HOT]: [] };
  try {
    // Warm-up (not measured): the first arm of a fresh server otherwise pays for JIT and the pools.
    await prepareArm(admin, true);
    await runArm(client, HOT, -1, WARMUP_MS);
    await runArm(client, FRESH, -1, WARMUP_MS);
    for (let round = 0; round < rounds(ctx); round++) {
      const order = round % 2 === 0 ? ARMS : [...ARMS].reverse();
      for (const arm of order) {
        await prepareArm(admin, arm !== PLAIN);
        const r = await runArm(client, arm, round, ARM_MS);
        results[arm].push(r);
        ctx.log(
          `  unique round ${round + 1} ${arm}: enqueue ${Math.round(r.enqueueRate)}/s (p50 ${fmt(percentile(r.enqueueMs, 50))} ms, ${r.kept} kept), ` +
            `claim+ack ${Math.round(r.claimRate)} jobs/s (claim p50 ${fmt(percentile(r.claimMs, 50))} ms)`,
        );
      }
    }
    return report(ctx, results);
  } finally {
    await admin.query('TRUNCATE baton.jobs, baton.scheduled_jobs, baton.job_history, baton.unique_keys');
  }
}

/** Untimed: empty the tables, insert the claim backlog (its jobs keyed or not), VACUUM ANALYZE. */
async function prepareArm(admin: Awaited<ReturnType<BenchContext['baton']>>['admin'], keyed: boolean) {
  await admin.query('TRUNCATE baton.jobs, baton.scheduled_jobs, baton.job_history, baton.unique_keys');
  await admin.query(
    `INSERT INTO baton.jobs (slot, id, queue, state, run_at, max_attempts, payload, unique_key)
     SELECT baton.job_slot(id), id, 'uq-claim', 'ready', now(), 5, jsonb_build_object('i', g),
            CASE WHEN $2::boolean THEN 'backlog-' || g END
     FROM (SELECT nextval('baton.jobs_id_seq') AS id, g FROM generate_series(1, $1::int) g) s`,
    [BACKLOG, keyed],
  );
  await admin.query('VACUUM ANALYZE baton.jobs, baton.scheduled_jobs, baton.job_history, baton.unique_keys');
}

/** 4 rounds (2 with --quick); each round takes a minute. */
const rounds = (ctx: BenchContext) => (ctx.quick ? 2 : 4);

/** One arm: the hot path (bench/load/hot-path-arm.ts) with this arm's enqueue bodies. */
function runArm(
  client: Awaited<ReturnType<BenchContext['baton']>>['client'],
  arm: Arm,
  round: number,
  armMs: number,
) {
  let n = 0;
  const body = (): object => {
    n++;
    if (arm === FRESH) return { payload: { n }, unique_key: `r${round}-k${n}` };
    if (arm === HOT) return { payload: { n }, unique_key: `hot-${n % HOT_KEYS}` };
    return { payload: { n } };
  };
  return runHotPathArm(client, {
    enqueueQueue: 'uq-enq',
    claimQueue: 'uq-claim',
    body,
    armMs,
    producers: PRODUCERS,
    workers: WORKERS,
  });
}

function report(ctx: BenchContext, results: Record<Arm, ArmResult[]>): ScenarioResult {
  const metric = (
    id: string,
    title: string,
    unit: string,
    better: 'higher' | 'lower',
    f: (r: ArmResult) => number,
  ): Metric => ({
    id: `unique.${id}`,
    title,
    unit,
    better,
    ratios: false,
    series: Object.fromEntries(ARMS.map((a) => [a, results[a].map(f)])),
  });
  const metrics: Metric[] = [
    ...hotPathMetrics(metric, { producers: PRODUCERS, workers: WORKERS }),
    metric('kept', 'Enqueues answered with a waiting job (200)', 'requests', 'higher', (r) => r.kept),
  ];
  const ratioOf = (id: string, arm: Arm) => {
    const m = metrics.find((x) => x.id === `unique.${id}`)!;
    return ratios(m.series[arm]!, m.series[PLAIN]!);
  };
  const check = (id: string, arm: Arm, label: string, ok: (r: number) => boolean, bound: string): Check => {
    const r = ratioOf(id, arm);
    return {
      target: `${label}, ${arm} within 10% of plain (${bound})`,
      met: ok(median(r)),
      detail: `${arm} / plain per round: ${r.map((x) => fmt(x)).join(', ')}; median ${fmt(median(r))}×`,
    };
  };
  const checks: Check[] = [];
  for (const arm of [FRESH, HOT] as const) {
    checks.push(
      check('enqueue-rate', arm, 'single-job enqueue throughput', (r) => r >= 0.9, 'ratio ≥ 0.9'),
      check('enqueue-p50', arm, 'single-job enqueue p50 latency', (r) => r <= 1.1, 'ratio ≤ 1.1'),
      check('claim-rate', arm, 'claim + ack throughput', (r) => r >= 0.9, 'ratio ≥ 0.9'),
      check('claim-p50', arm, 'claim p50 latency', (r) => r <= 1.1, 'ratio ≤ 1.1'),
    );
  }
  return {
    id: 'unique',
    title: 'Unique keys vs the hot path',
    setup: [
      `${rounds(ctx)} rounds, arms interleaved (${ARMS.join(', ')}; reversed every other round), ${ARM_MS / 1000} s each.`,
      `Load on the measured server: ${PRODUCERS} producers of single-job enqueues, ${WORKERS} workers claiming one job and acking it, over HTTP, without pause.`,
      `A warm-up of ${(2 * WARMUP_MS) / 1000} s (keyed enqueues, not measured) first.`,
      `Keyed arms: a new unique_key per enqueue, or one of ${HOT_KEYS} keys (keep); the claim backlog (${BACKLOG.toLocaleString('en-US')} jobs) carries unique keys in both.`,
    ],
    metrics,
    checks,
  };
}
