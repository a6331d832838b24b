import type { HttpClient } from './http-client.js';
import { produceInBatches } from './produce.js';

/**
 * Producers and workers that drive a Baton server over HTTP, as clients in any language would:
 * JSON requests, one keep-alive connection per concurrent caller. Every call checks its status, so a
 * run that "finishes fast" because requests failed is an error, not a result.
 */

export const payloadOf = (i: number) => ({ i });

function expect(status: number, want: number, what: string, body: unknown): void {
  if (status !== want) throw new Error(`${what}: HTTP ${status} ${JSON.stringify(body).slice(0, 300)}`);
}

/** Job `i` of a run: its payload, and any other enqueue fields (unique_key, group, delay_ms, ...). */
export type JobOf = (i: number) => Record<string, unknown>;
const plainJob: JobOf = (i) => ({ payload: payloadOf(i) });

/**
 * Enqueue `total` jobs, `batchSize` per request (1: the single-job route), `concurrency` callers;
 * `jobOf` writes each job's body (a plain payload by default).
 */
export async function enqueue(
  client: HttpClient,
  queue: string,
  total: number,
  batchSize: number,
  concurrency: number,
  jobOf: JobOf = plainJob,
): Promise<void> {
  const q = encodeURIComponent(queue);
  await produceInBatches(total, batchSize, concurrency, async (start, n) => {
    if (batchSize === 1) {
      const r = await client.post(`/v1/queues/${q}/jobs`, jobOf(start));
      expect(r.status, 201, 'enqueue', r.body);
    } else {
      const jobs = Array.from({ length: n }, (_, k) => jobOf(start + k));
      // As a producer that keeps only the ids: the answer is ids, not 100 jobs (src/http/prefer.ts).
      const r = await client.post(`/v1/queues/${q}/jobs/batch`, { jobs }, { prefer: 'return=minimal' });
      expect(r.status, 201, 'batch enqueue', r.body);
    }
  });
}

export interface WorkerOptions {
  workers: number;
  /** Jobs per claim; 1 acks each job on its own route, more acks the batch in one request. */
  claimSize: number;
  /** Stop once this many jobs are acked. */
  total: number;
  /** Long-poll wait of each claim (keeps idle workers from spinning while producers catch up). */
  waitMs: number;
  /**
   * Ack-and-claim: each ack (claimSize 1) or batch ack (more) carries `next` for claimSize jobs
   * (long-polling waitMs, as such a worker would), so a worker makes one request per job or batch; a
   * plain claim only at the start and when an ack brought nothing. Within the last `workers` claims'
   * worth of jobs the acks ask with wait_ms 0, so the timing, which ends at the last ack's answer, does
   * not include a wait for jobs that will never come.
   */
  ackAndClaim?: boolean;
}

/** Claim → ack loops. Resolves with the time (performance.now()) of the last ack's response. */
export async function work(client: HttpClient, queue: string, opts: WorkerOptions): Promise<number> {
  const q = encodeURIComponent(queue);
  let acked = 0;
  let lastAck = 0;
  if (opts.ackAndClaim) {
    const claim1 = { max_jobs: opts.claimSize, lease_ms: 60_000, wait_ms: opts.waitMs };
    await Promise.all(
      Array.from({ length: opts.workers }, async () => {
        let hand: { id: string; lease_token: string }[] = [];
        while (acked < opts.total) {
          if (hand.length === 0) {
            const claim = await client.post(`/v1/queues/${q}/claim`, claim1);
            expect(claim.status, 200, 'claim', claim.body);
            hand = claim.body.jobs;
            continue;
          }
          const tail = opts.total - acked <= opts.workers * opts.claimSize;
          const next = tail ? { ...claim1, wait_ms: 0 } : claim1;
          if (opts.claimSize === 1) {
            const job = hand[0]!;
            const r = await client.post(`/v1/jobs/${job.id}/ack`, { lease_token: job.lease_token, next });
            expect(r.status, 200, 'ack-and-claim', r.body);
            acked++;
            lastAck = performance.now();
            hand = r.body.next;
            continue;
          }
          const r = await client.post('/v1/jobs/ack', {
            acks: hand.map((j) => ({ id: j.id, lease_token: j.lease_token })),
            next,
          });
          expect(r.status, 200, 'batch ack-and-claim', r.body);
          if (r.body.failed > 0) throw new Error(`batch ack: ${r.body.failed} acks failed`);
          acked += r.body.acked;
          lastAck = performance.now();
          hand = r.body.next;
        }
      }),
    );
    return lastAck;
  }
  await Promise.all(
    Array.from({ length: opts.workers }, async () => {
      while (acked < opts.total) {
        const claim = await client.post(`/v1/queues/${q}/claim`, {
          max_jobs: opts.claimSize,
          lease_ms: 60_000,
          wait_ms: opts.waitMs,
        });
        expect(claim.status, 200, 'claim', claim.body);
        const jobs: { id: string; lease_token: string }[] = claim.body.jobs;
        if (jobs.length === 0) continue;
        if (opts.claimSize === 1) {
          const job = jobs[0]!;
          const r = await client.post(`/v1/jobs/${job.id}/ack`, { lease_token: job.lease_token });
          expect(r.status, 200, 'ack', r.body);
          acked++;
        } else {
          const r = await client.post('/v1/jobs/ack', {
            acks: jobs.map((j) => ({ id: j.id, lease_token: j.lease_token })),
          });
          expect(r.status, 200, 'batch ack', r.body);
          if (r.body.failed > 0) throw new Error(`batch ack: ${r.body.failed} acks failed`);
          acked += r.body.acked;
        }
        lastAck = performance.now();
      }
    }),
  );
  return lastAck;
}
