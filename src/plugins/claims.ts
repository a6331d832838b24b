import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import type { ClaimRequest } from '../http/schemas/jobs.js';
import { releaseClaims } from '../jobs/claim/release.js';
import type { Claimant, ClaimedRow } from '../jobs/claim/types.js';
import { ClaimGroups } from '../jobs/statement-groups.js';
import { claimWithWait } from '../wake/long-poll.js';

declare module 'fastify' {
  interface FastifyInstance {
    /**
     * Claim for a request, as POST /v1/queues/{queue}/claim does: the claim route and ack-and-claim
     * (`next` on ack, nack and the batch ack) both answer through this, so flow control, paused
     * queues, long-poll, shutdown and a client that goes away behave the same on each. Answers the
     * claimed rows; each route writes them in its own answer.
     */
    claimFor: (
      request: FastifyRequest,
      reply: FastifyReply,
      queue: string,
      body: ClaimRequest,
    ) => Promise<ClaimedRow[]>;
    /**
     * Hand out jobs a statement other than the claim's claimed for a request (ack-and-claim in one
     * statement, jobs/claim/ack-and-claim.ts), as claimFor would: given back if the client has gone, counted
     * in the metrics, and a full batch passes the baton to the queue's next long-poll. Answers the rows.
     */
    handOut: (
      request: FastifyRequest,
      queue: string,
      body: ClaimRequest,
      rows: ClaimedRow[],
    ) => Promise<ClaimedRow[]>;
  }
}

/** A claim request's body (the claim route's, or an ack's `next`) as the claim statements take it. */
export function claimantOf(body: ClaimRequest): Claimant {
  return { maxJobs: body.max_jobs ?? 1, leaseMs: body.lease_ms, workerId: body.worker_id };
}

/**
 * The one claim path of the HTTP API. One ClaimGroups per replica, so concurrent claims of a queue
 * share one statement (src/jobs/statement-groups.ts) whichever route they came through.
 */
export default fp(
  async function claims(app: FastifyInstance) {
    const { config } = app;
    const groups = new ClaimGroups(app.db, config.defaultLeaseMs);

    app.decorate('claimFor', async (request, reply, queue, body) => {
      // The response's 'close' fires when it finishes or when the client drops the connection;
      // only the latter (nothing written yet) should stop the long-poll.
      const abort = new AbortController();
      const onClose = () => {
        if (!reply.raw.writableEnded) abort.abort();
      };
      reply.raw.once('close', onClose);
      try {
        const { jobs: rows } = await claimWithWait(groups, app.wake.waitList, {
          queue,
          ...claimantOf(body),
          waitMs: app.shuttingDown ? 0 : (body.wait_ms ?? 0),
          pollIntervalMs: config.pollIntervalMs,
          signal: abort.signal,
          onHeldBack: (held) => {
            app.metrics.claimsHeldBack.inc({ queue: app.metrics.queue(queue), reason: held.reason });
            app.wake.notifier.watchSlots(queue);
          },
        });
        if (abort.signal.aborted && rows.length > 0) {
          // The client left while we claimed: nobody will receive these leases, so hand the jobs back.
          const released = await releaseClaims(app.db, rows);
          request.log.info({ released }, 'claimant went away; released its jobs');
          app.wake.notifier.jobsReady(queue, released);
          return [];
        }
        app.metrics.claimed(queue, rows);
        return rows;
      } finally {
        reply.raw.off('close', onClose);
      }
    });

    app.decorate('handOut', async (request, queue, body, rows) => {
      if (rows.length === 0) return rows;
      if (request.raw.socket?.destroyed) {
        const released = await releaseClaims(app.db, rows);
        request.log.info({ released }, 'claimant went away; released its jobs');
        app.wake.notifier.jobsReady(queue, released);
        return [];
      }
      app.metrics.claimed(queue, rows);
      if (rows.length === claimantOf(body).maxJobs) app.wake.waitList.wake(queue, 1);
      return rows;
    });
  },
  { name: 'claims', fastify: '5.x', dependencies: ['database', 'metrics', 'wake'] },
);
