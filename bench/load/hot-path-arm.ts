import type { BenchContext } from '../context.js';
import type { Metric } from '../report.js';
import { percentile } from '../stats.js';

type Client = Awaited<ReturnType<BenchContext['baton']>>['client'];

export interface HotPathArm {
  /** Queue the producers enqueue into, one job per request. */
  enqueueQueue: string;
  /** Queue the workers claim one job from and ack (preloaded: it must not run out). */
  claimQueue: string;
  /** The body of each enqueue. */
  body: () => object;
  armMs: number;
  producers: number;
  workers: number;
}

export interface HotPathArmResult {
  enqueueRate: number;
  enqueueMs: number[];
  claimRate: number;
  claimMs: number[];
  /** Enqueues answered 200: a key matched an existing job. */
  kept: number;
}

/**
 * One arm of a "does this slow the hot path?" scenario (schedules, unique keys): for `armMs`,
 * producers enqueue single jobs while workers claim one job and ack it, all over HTTP, timing each
 * enqueue and each claim.
 */
export async function runHotPathArm(client: Client, arm: HotPathArm): Promise<HotPathArmResult> {
  const enqueueMs: number[] = [];
  const claimMs: number[] = [];
  let claimed = 0;
  let kept = 0;
  const started = performance.now();
  const deadline = started + arm.armMs;
  const producer = async () => {
    while (performance.now() < deadline) {
      const t0 = performance.now();
      const r = await client.post(`/v1/queues/${arm.enqueueQueue}/jobs`, arm.body());
      if (r.status === 200) kept++;
      else if (r.status !== 201) throw new Error(`enqueue: HTTP ${r.status}`);
      enqueueMs.push(performance.now() - t0);
    }
  };
  const worker = async () => {
    while (performance.now() < deadline) {
      const t0 = performance.now();
      const r = await client.post(`/v1/queues/${arm.claimQueue}/claim`, { max_jobs: 1 });
      if (r.status !== 200) throw new Error(`claim: HTTP ${r.status}`);
      claimMs.push(performance.now() - t0);
      const job = r.body.jobs[0];
      if (!job) throw new Error('the claim backlog ran out; raise BACKLOG');
      const ack = await client.post(`/v1/jobs/${job.id}/ack`, { lease_token: job.lease_token });
      if (ack.status !== 200) throw new Error(`ack: HTTP ${ack.status}`);
      claimed++;
    }
  };
  await Promise.all([
    ...Array.from({ length: arm.producers }, producer),
    ...Array.from({ length: arm.workers }, worker),
  ]);
  const seconds = (performance.now() - started) / 1000;
  return { enqueueRate: enqueueMs.length / seconds, enqueueMs, claimRate: claimed / seconds, claimMs, kept };
}

/** How a scenario makes one metric of its arms' results (its id prefix and series). */
type MetricOf<R> = (
  id: string,
  title: string,
  unit: string,
  better: 'higher' | 'lower',
  f: (r: R) => number,
) => Metric;

/** The hot path's six metrics (enqueue and claim: rate, p50, p99), as every scenario on an arm reports them. */
export function hotPathMetrics<R extends Omit<HotPathArmResult, 'kept'>>(
  metric: MetricOf<R>,
  load: { producers: number; workers: number },
): Metric[] {
  return [
    metric(
      'enqueue-rate',
      `Single-job enqueue (${load.producers} producers)`,
      'jobs/s',
      'higher',
      (r) => r.enqueueRate,
    ),
    metric('enqueue-p50', 'Single-job enqueue latency p50', 'ms', 'lower', (r) =>
      percentile(r.enqueueMs, 50),
    ),
    metric('enqueue-p99', 'Single-job enqueue latency p99', 'ms', 'lower', (r) =>
      percentile(r.enqueueMs, 99),
    ),
    metric('claim-rate', `Claim one + ack (${load.workers} workers)`, 'jobs/s', 'higher', (r) => r.claimRate),
    metric('claim-p50', 'Claim latency p50', 'ms', 'lower', (r) => percentile(r.claimMs, 50)),
    metric('claim-p99', 'Claim latency p99', 'ms', 'lower', (r) => percentile(r.claimMs, 99)),
  ];
}
