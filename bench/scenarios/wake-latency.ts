import type { BenchContext } from '../context.js';
import { BATON_PORT } from '../context.js';
import { HttpClient } from '../load/http-client.js';
import { GRAPHILE } from '../peers/graphile-worker.js';
import type { QueuePeer } from '../peers/peer.js';
import { PG_BOSS } from '../peers/pg-boss.js';
import { BATON, type Metric, type ScenarioResult } from '../report.js';
import { fmt, median, percentile } from '../stats.js';

/**
 * Scenario 6: wake latency. A claim long-polls (wait_ms 5,000) on an empty queue; then one job is
 * enqueued; the latency is from the enqueue's 201 arriving at the client to the claim's response
 * arriving. Same replica: both requests go to one server (in-process wake-up). Across replicas:
 * the claim waits on a second server process and the enqueue goes to the first, so the wake-up
 * travels by NOTIFY. The claim's response can arrive before the 201 (both leave the server after the
 * commit), which shows as a latency at or below zero.
 * Peers, for reference (one process, as their producers and workers usually are): time from
 * graphile-worker's addJob() resolving to the task starting (its LISTEN/NOTIFY wake-up), and from
 * pg-boss's send() resolving to the handler starting (useListenNotify, queue notify).
 */

const QUEUE = 'wake';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function batonSamples(
  claimer: HttpClient,
  producer: HttpClient,
  samples: number,
  acker: HttpClient,
): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < samples; i++) {
    let claimedAt = 0;
    const claim = claimer
      .post(`/v1/queues/${QUEUE}/claim`, { max_jobs: 1, wait_ms: 5_000, lease_ms: 60_000 })
      .then((r) => {
        claimedAt = performance.now();
        return r;
      });
    // Let the claim reach the server and start waiting (an empty queue answers in about a millisecond).
    await sleep(25);
    const r = await producer.post(`/v1/queues/${QUEUE}/jobs`, { payload: { i } });
    const created = performance.now();
    if (r.status !== 201) throw new Error(`enqueue: HTTP ${r.status}`);
    const c = await claim;
    const job = c.body.jobs?.[0];
    if (!job) throw new Error('the long-polling claim returned no job within 5 s');
    out.push(claimedAt - created);
    await acker.post(`/v1/jobs/${job.id}/ack`, { lease_token: job.lease_token });
  }
  return out;
}

/**
 * A peer's wake latency: one worker waiting, then `samples` single enqueues, each timed to the
 * moment its handler starts. `settleMs` lets the worker reach its waiting state first.
 */
async function peerSamples<C>(
  peer: QueuePeer<C>,
  name: string,
  config: C,
  settleMs: number,
  samples: number,
) {
  return peer.withQueue(async () => {
    let started = 0;
    peer.onJob = () => {
      started = performance.now();
    };
    const out: number[] = [];
    try {
      await peer.startWorkers(config);
      await sleep(settleMs);
      for (let i = 0; i < samples; i++) {
        started = 0;
        await peer.enqueue(1, 1, 1);
        const added = performance.now();
        const deadline = added + 5_000;
        while (started === 0 && performance.now() < deadline) await sleep(0.2);
        if (started === 0) throw new Error(`${name} did not start the job within 5 s`);
        out.push(started - added);
        await sleep(25);
      }
    } finally {
      peer.onJob = undefined;
      await peer.stopWorkers();
    }
    return out;
  });
}

export async function wakeLatency(ctx: BenchContext): Promise<ScenarioResult> {
  const { server, client, admin } = await ctx.baton();
  const samples = ctx.sizes.wakeSamples;
  const second = await ctx.extraBaton(BATON_PORT + 1, { BATON_MAINTENANCE: 'false' });
  const claimerA = new HttpClient(server.url, 4);
  const claimerB = new HttpClient(second.url, 4);
  const raw: Record<string, number[][]> = {
    'Baton, same replica': [],
    'Baton, across replicas (NOTIFY)': [],
    [GRAPHILE]: [],
    [PG_BOSS]: [],
  };
  try {
    await admin.query('TRUNCATE baton.jobs, baton.job_history');
    // Warm both servers' paths (first requests compile code and open connections).
    await batonSamples(claimerA, client, 5, client);
    await batonSamples(claimerB, client, 5, client);
    for (let round = 0; round < ctx.sizes.claimRounds; round++) {
      for (const path of ctx.order(round, [BATON, GRAPHILE, PG_BOSS])) {
        if (path === BATON) {
          raw['Baton, same replica']!.push(await batonSamples(claimerA, client, samples, client));
          raw['Baton, across replicas (NOTIFY)']!.push(await batonSamples(claimerB, client, samples, client));
        } else if (path === GRAPHILE) {
          const config = { concurrency: 1, maxPoolSize: 4 };
          raw[GRAPHILE]!.push(await peerSamples(await ctx.graphile(), GRAPHILE, config, 200, samples));
        } else {
          const config = { batchSize: 1, localConcurrency: 1 };
          raw[PG_BOSS]!.push(await peerSamples(await ctx.pgBoss(), PG_BOSS, config, 1_000, samples));
        }
      }
      ctx.log(
        `  wake round ${round + 1}: p99 same ${fmt(percentile(raw['Baton, same replica']!.at(-1)!, 99))} ms, across ${fmt(percentile(raw['Baton, across replicas (NOTIFY)']!.at(-1)!, 99))} ms`,
      );
    }
  } finally {
    claimerA.close();
    claimerB.close();
    await ctx.stopExtra(second);
  }
  const perRound = (q: number) =>
    Object.fromEntries(
      Object.entries(raw)
        .filter(([, v]) => v.length > 0)
        .map(([k, v]) => [k, v.map((s) => percentile(s, q))]),
    );
  const p50: Metric = {
    id: 'wake.p50',
    title: 'Wake latency p50',
    unit: 'ms',
    better: 'lower',
    ratios: false,
    series: perRound(50),
  };
  const p99: Metric = {
    id: 'wake.p99',
    title: 'Wake latency p99',
    unit: 'ms',
    better: 'lower',
    ratios: false,
    series: perRound(99),
  };
  const same = median(p99.series['Baton, same replica'] ?? []);
  const across = median(p99.series['Baton, across replicas (NOTIFY)'] ?? []);
  return {
    id: 'wake',
    title: 'Scenario 6: wake latency',
    setup: [
      `${samples} wake-ups per path and round, ${ctx.sizes.claimRounds} rounds; one long-polling claim at a time (max_jobs 1, wait_ms 5,000), then one POST /v1/queues/{q}/jobs.`,
      'Latency: from the enqueue 201 reaching the client to the claim response reaching the client (same clock). Across replicas the claim waits on a second server process (BATON_MAINTENANCE=false) and the wake-up goes through NOTIFY (coalescing window 2 ms).',
      'Peers (in-process, for reference): addJob()/send() resolving → handler start; graphile-worker concurrency 1, pg-boss batchSize 1 with useListenNotify.',
    ],
    metrics: [p50, p99],
    checks: [
      {
        target: 'p99 under 10 ms on one replica',
        met: same < 10,
        detail: `${fmt(same)} ms (median of rounds)`,
      },
      {
        target: 'p99 under 50 ms across replicas',
        met: across < 50,
        detail: `${fmt(across)} ms (median of rounds)`,
      },
    ],
  };
}
