import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Claimant, ClaimedRow } from '../jobs/claim.js';
import type { JobUseCases } from '../service/jobs.js';
import type { ClaimRequest } from './schemas/jobs.js';

/** A claim request's body (the claim route's, or an ack's `next`) as the claim statements take it. */
export function claimantOf(body: ClaimRequest): Claimant {
  return { maxJobs: body.max_jobs ?? 1, leaseMs: body.lease_ms, workerId: body.worker_id };
}

/**
 * Claim for an HTTP request, as POST /v1/queues/{queue}/claim does; ack-and-claim's `next` answers
 * through it too. The client going away (the response closes before anything was written) ends the
 * long-poll, and the service gives back what it claimed meanwhile.
 */
export async function claimFor(
  jobs: JobUseCases,
  request: FastifyRequest,
  reply: FastifyReply,
  queue: string,
  body: ClaimRequest,
): Promise<ClaimedRow[]> {
  // 'close' fires when the response finishes or when the client drops the connection; only the
  // latter (nothing written yet) should stop the long-poll.
  const abort = new AbortController();
  const onClose = () => {
    if (!reply.raw.writableEnded) abort.abort();
  };
  reply.raw.once('close', onClose);
  try {
    return await jobs.claim({
      queue,
      ...claimantOf(body),
      waitMs: body.wait_ms ?? 0,
      signal: abort.signal,
      log: request.log,
    });
  } finally {
    reply.raw.off('close', onClose);
  }
}

/** Hand out jobs ack-and-claim's statement claimed for this request (JobUseCases.handOut). */
export function handOutFor(
  jobs: JobUseCases,
  request: FastifyRequest,
  queue: string,
  body: ClaimRequest,
  rows: ClaimedRow[],
): Promise<ClaimedRow[]> {
  const gone = request.raw.socket?.destroyed ? AbortSignal.abort() : new AbortController().signal;
  return jobs.handOut({ queue, ...claimantOf(body), signal: gone, log: request.log }, rows);
}
