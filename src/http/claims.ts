import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Claimant } from '../jobs/claim/types.js';
import { traceFromHeaders } from '../jobs/trace-context.js';
import type { NextClaim } from '../service/leases.js';
import type { ClaimRequest } from './schemas/jobs.js';

/** A claim request's body (the claim route's, or an ack's `next`) as the claim statements take it. */
export function claimantOf(body: ClaimRequest): Claimant {
  return { maxJobs: body.max_jobs ?? 1, leaseMs: body.lease_ms, workerId: body.worker_id };
}

/**
 * A claim request's body as the service's claim takes it, for this request: it long-polls up to
 * `wait_ms`, and stops (giving back what it claimed) once `signal` says the client has gone. Its
 * span continues the request's traceparent header, when it has one (`trace`, if the caller read it already).
 */
export function claimOf(
  request: FastifyRequest,
  body: ClaimRequest,
  signal: AbortSignal,
  trace = traceFromHeaders(request.headers),
): NextClaim {
  return {
    ...claimantOf(body),
    waitMs: body.wait_ms ?? 0,
    signal,
    log: request.log,
    ...(trace ? { trace } : {}),
  };
}

/**
 * Run `work` with a signal that aborts when the client goes away: the response's 'close' fires when
 * it finishes or when the client drops the connection, and only the latter (nothing written yet)
 * aborts. A client may also have gone before this runs (while auth, validation or a lookup ran):
 * then 'close' has fired already and never fires again, so the response's `destroyed` says so, and
 * the work starts aborted instead of waiting out its wait_ms for nobody (and, for a claim, holding
 * the jobs it took until their leases run out).
 */
export async function whileConnected<T>(
  reply: FastifyReply,
  work: (signal: AbortSignal) => Promise<T>,
): Promise<T> {
  const abort = new AbortController();
  const onClose = () => {
    if (!reply.raw.writableEnded) abort.abort();
  };
  reply.raw.once('close', onClose);
  if (reply.raw.destroyed) onClose();
  try {
    return await work(abort.signal);
  } finally {
    reply.raw.off('close', onClose);
  }
}
