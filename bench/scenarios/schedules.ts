import type { BenchContext } from '../context.js';
import { BATON_PORT } from '../context.js';
import { hotPathMetrics, runHotPathArm } from '../load/hot-path-arm.js';
import type { Check, Metric, ScenarioResult } from '../report.js';
import { fmt, median, percentile, ratios } from '../stats.js';

/**
 * Do cron schedules slow the hot path? 10,000 schedules firing every minute (`* * * * *`,
 * spread over 100 queues, so 10,000 jobs at the start of every minute) against none, interleaved
 * arm by arm, while 4 producers send single-job enqueues and 4 workers claim one job and ack it, all
 * over HTTP to the measured server. A second Baton process is the maintenance leader (the measured
 * server runs no maintenance, as in every scenario); it runs in both arms, all its duties included;
 * only whether the schedules are paused differs.
 *
 * Each arm runs 30 s. An arm with schedules starts at second 45, so the minute boundary, when all
 * 10,000 fire, falls inside it: it carries a whole minute's schedule work in half a minute, twice the
 * steady rate, so the comparison errs against schedules. Short interleaved arms, because this machine
 * is shared and its load drifts by the minute.
 *
 * Before each arm (untimed): jobs, history and idempotency keys emptied, VACUUM ANALYZE, and a
 * backlog of ready jobs for the workers inserted in SQL, so claims never run dry.
 */

const SCHEDULES = 10_000;
const SCHEDULE_QUEUES = 100;
const ARM_MS = 30_000;
/** The second of the minute an arm with schedules starts at (the boundary is 15 s into it). */
const WITH_START_SECOND = 45;
const PRODUCERS = 4;
const WORKERS = 4;
const BACKLOG = 100_000;
const WITH = 'with 10,000 schedules';
const WITHOUT = 'without (paused)';
const ARMS = [WITH, WITHOUT] as const;
type Arm = (typeof ARMS)[number];

interface ArmResult {
  enqueueRate: number;
  enqueueMs: number[];
  claimRate: number;
  claimMs: number[];
  /** Occurrences the leader enqueued during the arm, and their lateness (from its /metrics). */
  occurrences: number;
  latenessP50: number;
  latenessP99: number;
  latenessMax: number;
  leaderCpuMs: number;
}

/** Lateness buckets of the leader's histogram, summed over queues. */
async function latenessBuckets(url: string): Promise<Map<number, number>> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const out = new Map<number, number>();
  for (const m of text.matchAll(/^baton_schedule_lateness_seconds_bucket\{([^}]*)\} (\S+)$/gm)) {
    const le = /le="([^"]+)"/.exec(m[1]!)?.[1];
    if (!le) continue;
    const bound = le === '+Inf' ? Number.POSITIVE_INFINITY : Number(le);
    out.set(bound, (out.get(bound) ?? 0) + Number(m[2]));
  }
  return out;
}

/** The bucket bound under which fraction q of the observations between two scrapes fell. */
function bucketQuantile(before: Map<number, number>, after: Map<number, number>, q: number): number {
  const bounds = [...after.keys()].sort((a, b) => a - b);
  const total = (after.get(Number.POSITIVE_INFINITY) ?? 0) - (before.get(Number.POSITIVE_INFINITY) ?? 0);
  if (total === 0) return Number.NaN;
  for (const b of bounds) {
    if ((after.get(b) ?? 0) - (before.get(b) ?? 0) >= q * total) return b;
  }
  return Number.POSITIVE_INFINITY;
}

export async function schedulesScenario(ctx: BenchContext): Promise<ScenarioResult> {
  const { client, admin } = await ctx.baton();
  const leader = await ctx.extraBaton(BATON_PORT + 7, { BATON_MAINTENANCE: 'true' });
  try {
    await admin.query(
      `INSERT INTO baton.queues (name, auto_created)
       SELECT 'sched-' || g, false FROM generate_series(0, $1::int - 1) g
       UNION ALL SELECT 'bench-claim', false UNION ALL SELECT 'bench-enq', false
       ON CONFLICT (name) DO NOTHING`,
      [SCHEDULE_QUEUES],
    );
    // Written in SQL for speed (PUT would take minutes here); the rows are what PUT writes.
    await admin.query('DELETE FROM baton.schedules');
    await admin.query(
      `INSERT INTO baton.schedules (name, queue, cron, payload, paused, next_run_at)
       SELECT 'bench-' || g, 'sched-' || (g % $2::int), '* * * * *', jsonb_build_object('n', g), true,
              date_trunc('minute', now()) + interval '1 minute'
       FROM generate_series(1, $1::int) g`,
      [SCHEDULES, SCHEDULE_QUEUES],
    );

    const results: Record<Arm, ArmResult[]> = { [WITH]: [], [WITHOUT]: [] };
    for (let round = 0; round < rounds(ctx); round++) {
      for (const arm of round % 2 === 0 ? ARMS : [...ARMS].reverse()) {
        await admin.query('TRUNCATE baton.jobs, baton.job_history, baton.idempotency_keys');
        await admin.query(
          `INSERT INTO baton.jobs (slot, id, queue, state, run_at, max_attempts, payload)
           SELECT baton.job_slot(id), id, 'bench-claim', 'ready', now(), 5, jsonb_build_object('i', g)
           FROM (SELECT nextval('baton.jobs_id_seq') AS id, g FROM generate_series(1, $1::int) g) s`,
          [BACKLOG],
        );
        await admin.query('UPDATE baton.schedules SET paused = true');
        await admin.query(
          'VACUUM ANALYZE baton.jobs, baton.job_history, baton.schedules, baton.idempotency_keys',
        );
        if (arm === WITH) {
          await untilSecond(WITH_START_SECOND);
          await admin.query(
            `UPDATE baton.schedules SET paused = false, next_run_at = date_trunc('minute', now()) + interval '1 minute'`,
          );
        }
        const before = await latenessBuckets(leader.url);
        const cpuBefore = leader.cpuMs();
        const r = await runHotPathArm(client, {
          enqueueQueue: 'bench-enq',
          claimQueue: 'bench-claim',
          body: () => ({ payload: { n: 1 } }),
          armMs: ARM_MS,
          producers: PRODUCERS,
          workers: WORKERS,
        });
        const after = await latenessBuckets(leader.url);
        const occurrences =
          (after.get(Number.POSITIVE_INFINITY) ?? 0) - (before.get(Number.POSITIVE_INFINITY) ?? 0);
        const full: ArmResult = {
          ...r,
          occurrences,
          latenessP50: bucketQuantile(before, after, 0.5),
          latenessP99: bucketQuantile(before, after, 0.99),
          latenessMax: bucketQuantile(before, after, 1),
          leaderCpuMs: leader.cpuMs() - cpuBefore,
        };
        results[arm].push(full);
        ctx.log(
          `  schedules round ${round + 1} ${arm}: enqueue ${Math.round(full.enqueueRate)}/s (p50 ${fmt(percentile(full.enqueueMs, 50))} ms), ` +
            `claim+ack ${Math.round(full.claimRate)} jobs/s (claim p50 ${fmt(percentile(full.claimMs, 50))} ms); ` +
            `${occurrences} occurrences, lateness p99 ≤ ${full.latenessP99} s; leader CPU ${Math.round(full.leaderCpuMs)} ms`,
        );
      }
    }
    await admin.query('UPDATE baton.schedules SET paused = true');
    return report(ctx, results);
  } finally {
    await ctx.stopExtra(leader);
    await admin.query('DELETE FROM baton.schedules');
    await admin.query('TRUNCATE baton.jobs, baton.job_history, baton.idempotency_keys');
  }
}

/** 6 rounds (2 with --quick): each takes about a minute. */
const rounds = (ctx: BenchContext) => (ctx.quick ? 2 : 6);

/** Wait until the wall clock shows this second of a minute. */
async function untilSecond(second: number): Promise<void> {
  const now = new Date();
  let wait = (second - now.getSeconds()) * 1000 - now.getMilliseconds();
  if (wait < 0) wait += 60_000;
  await new Promise((r) => setTimeout(r, wait));
}

function report(ctx: BenchContext, results: Record<Arm, ArmResult[]>): ScenarioResult {
  const series = (f: (r: ArmResult) => number) => ({
    [WITH]: results[WITH].map(f),
    [WITHOUT]: results[WITHOUT].map(f),
  });
  const metric = (
    id: string,
    title: string,
    unit: string,
    better: 'higher' | 'lower',
    f: (r: ArmResult) => number,
  ): Metric => ({
    id: `schedules.${id}`,
    title,
    unit,
    better,
    ratios: false,
    series: series(f),
  });
  const metrics: Metric[] = [
    ...hotPathMetrics(metric, { producers: PRODUCERS, workers: WORKERS }),
    metric('occurrences', 'Occurrences the leader enqueued per arm', 'jobs', 'higher', (r) => r.occurrences),
    metric('lateness-p99', 'Occurrence lateness p99 (bucket bound)', 's', 'lower', (r) => r.latenessP99),
    metric('leader-cpu', 'Leader process CPU per arm', 'ms', 'lower', (r) => r.leaderCpuMs),
  ];
  const ratioOf = (id: string) => {
    const m = metrics.find((x) => x.id === `schedules.${id}`)!;
    return ratios(m.series[WITH]!, m.series[WITHOUT]!);
  };
  const check = (id: string, label: string, ok: (r: number) => boolean, bound: string): Check => {
    const r = ratioOf(id);
    return {
      target: `${label} with schedules within 10% of without (${bound})`,
      met: ok(median(r)),
      detail: `with / without per round: ${r.map((x) => fmt(x)).join(', ')}; median ${fmt(median(r))}×`,
    };
  };
  return {
    id: 'schedules',
    title: '10,000 cron schedules every minute vs the hot path',
    setup: [
      `${rounds(ctx)} rounds, arms interleaved (with, without; then without, with), ${ARM_MS / 1000} s each; an arm with schedules starts at second ${WITH_START_SECOND}, so all 10,000 fire inside it (a minute's schedule work in half a minute).`,
      `${SCHEDULES.toLocaleString('en-US')} schedules \`* * * * *\` over ${SCHEDULE_QUEUES} queues (10,000 jobs at every minute), fired by a second Baton process that leads maintenance; paused in the other arm.`,
      `Load on the measured server: ${PRODUCERS} producers of single-job enqueues, ${WORKERS} workers claiming one job and acking it, over HTTP, without pause.`,
    ],
    metrics,
    checks: [
      check('enqueue-rate', 'single-job enqueue throughput', (r) => r >= 0.9, 'ratio ≥ 0.9'),
      check('enqueue-p50', 'single-job enqueue p50 latency', (r) => r <= 1.1, 'ratio ≤ 1.1'),
      check('claim-rate', 'claim + ack throughput', (r) => r >= 0.9, 'ratio ≥ 0.9'),
      check('claim-p50', 'claim p50 latency', (r) => r <= 1.1, 'ratio ≤ 1.1'),
      {
        target: 'every occurrence enqueued (10,000 per arm with schedules)',
        met: results[WITH].every((r) => r.occurrences === SCHEDULES),
        detail: results[WITH].map((r) => r.occurrences).join(', '),
      },
    ],
    details: {
      latenessMaxBucket: results[WITH].map((r) => r.latenessMax),
      latenessP50Bucket: results[WITH].map((r) => r.latenessP50),
    },
  };
}
