import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { deadlineExceeded, jobNotFound, leaseLost } from '../errors.js';
import { sendJsonText, withNextJson } from '../http/claim-response.js';
import { isoTime } from '../http/iso-time.js';
import { jsonText } from '../http/json-input.js';
import { type ClaimRequest, Job, JobParams } from '../http/schemas/jobs.js';
import {
  AckRequest,
  BatchAckRequest,
  BatchAckResponse,
  BatchRenewRequest,
  BatchRenewResponse,
  JobAndNext,
  NackRequest,
  RenewRequest,
  RenewResponse,
} from '../http/schemas/leases.js';
import { ref } from '../http/schemas/ref.js';
import { errorResponses, ok } from '../http/schemas/responses.js';
import { toJob } from '../http/views.js';
import { type AckItem, ackJob, ackJobs } from '../jobs/ack.js';
import { cancelJob } from '../jobs/cancel.js';
import type { ClaimedRow } from '../jobs/claim/types.js';
import { checkDistinctIds, type LeaseOutcome, queueOfBatch } from '../jobs/lease-outcome.js';
import { nackJob } from '../jobs/nack.js';
import { getJob } from '../jobs/read.js';
import { type RenewOutcome, renewLease, renewLeases } from '../jobs/renew.js';
import { AckAndClaimGroups, AckGroups } from '../jobs/statement-groups.js';
import { claimantOf } from '../plugins/claims.js';

/** Routes under /v1/jobs: read a job, and the lease holder's renew, ack and nack; cancel. */

type LeaseOperation = 'renew' | 'ack' | 'nack';

/** What `next` does, for the descriptions of the ack, the batch ack and the nack. */
const ackAndClaim = (verb: 'ack' | 'nack') =>
  ' With `next` (a claim request), also claims the next jobs of the same queue under fresh leases and ' +
  'answers them in `next`, as POST /v1/queues/{queue}/claim would (long-poll, flow control and paused ' +
  `queues included). The ${verb} is committed whatever happens to the claim: if the claim fails, ` +
  'the answer is still 200 with an empty `next`. A lost lease (409) claims nothing.';

const jobs: FastifyPluginAsyncTypebox = async (app) => {
  const { config } = app;
  // Concurrent acks share one statement and one commit (src/jobs/statement-groups.ts).
  const acks = new AckGroups(app.db);
  // A single ack with `next` acks and claims in one statement where it can (jobs/claim/ack-and-claim.ts).
  const acksAndClaims = new AckAndClaimGroups(app.db, config.defaultLeaseMs);

  /** A single lease write's answer: its value, or 409 lease_lost (counted) or 404. */
  const settle = <T>(out: LeaseOutcome<T>, id: string, operation: LeaseOperation): T => {
    if (out.outcome === 'done') return out.value;
    if (out.outcome === 'not_found') throw jobNotFound(id);
    app.metrics.leaseLost(out.queue, operation);
    throw leaseLost(id);
  };

  /**
   * A batch's outcomes by item, in request order. Items a queue-limited key may not see (absent from
   * its `scope`, see plugins/auth.ts) are left out of the write and answered not_found; lost leases
   * are counted.
   */
  const settleBatch = async <I extends { id: string }, O extends LeaseOutcome<unknown> | RenewOutcome>(
    items: I[],
    scope: ReadonlyMap<string, string> | undefined,
    operation: LeaseOperation,
    write: (visible: I[]) => Promise<O[]>,
  ): Promise<(O | { outcome: 'not_found' })[]> => {
    const visible = scope ? items.filter((item) => scope.has(item.id)) : items;
    const outcomes = await write(visible);
    const byId = new Map<string, O>(visible.map((item, i) => [item.id, outcomes[i]!]));
    for (const out of byId.values() as Iterable<LeaseOutcome<unknown> | RenewOutcome>)
      if (out.outcome === 'lease_lost') app.metrics.leaseLost(out.queue, operation);
    return items.map((item) => byId.get(item.id) ?? { outcome: 'not_found' as const });
  };

  /**
   * Ack-and-claim: after the ack (or nack) has committed, claim the next jobs of its queue through the
   * claim route's own path (plugins/claims.ts). The ack stands whatever happens here: a claim that
   * fails is logged and answered as no jobs, so the worker learns its ack went through and claims
   * again. Who may ack a job may claim from its queue (both need the consumer scope and the job's
   * queue, checked by plugins/auth.ts before the ack), so nothing is refused after the ack.
   */
  const claimNext = async (
    request: FastifyRequest,
    reply: FastifyReply,
    queue: string,
    next: ClaimRequest,
  ) => {
    try {
      return await app.claimFor(request, reply, queue, next);
    } catch (err) {
      request.log.error({ err, queue }, 'ack-and-claim: the ack is committed, the claim of next jobs failed');
      return [];
    }
  };

  /**
   * The ack and the claim of `next` in one statement (jobs/claim/ack-and-claim.ts). Answers undefined, and
   * the route takes the ack path and then the claim path, when it did not ack the job (a lost lease,
   * a repeated ack, a job carried to another slot) or failed: being atomic, it then did nothing.
   */
  const ackAndClaimOnce = async (request: FastifyRequest, item: AckItem, next: ClaimRequest) => {
    try {
      const out = await acksAndClaims.ackAndClaim({ ...item, next: claimantOf(next) });
      return out.job ? out : undefined;
    } catch (err) {
      request.log.warn({ err }, 'ack-and-claim in one statement failed; acking, then claiming');
      return undefined;
    }
  };

  /**
   * An answer with `next`: the answer serialised by the route's schema with an empty `next`, the
   * claimed jobs spliced in as the claim writes them (http/claim-response.ts).
   */
  const sendWithNext = (reply: FastifyReply, answer: { next: [] }, rows: ClaimedRow[]) =>
    sendJsonText(reply, withNextJson(String(reply.serialize(answer)), rows));

  app.get(
    '/v1/jobs/:id',
    {
      config: { access: { scopes: ['producer', 'consumer'], queue: 'job' } },
      schema: {
        tags: ['jobs'],
        operationId: 'getJob',
        summary: 'Read a job in any state',
        description:
          'Live or finished: state, attempts, error history, result and timestamps. Never the lease token.',
        params: JobParams,
        response: { 200: ok(ref(Job), 'The job, without its lease token.'), ...errorResponses(404) },
      },
    },
    async (request) => {
      const { id } = request.params;
      const row = await getJob(app.db, id, request.jobQueues?.get(id));
      if (!row) throw jobNotFound(id);
      return toJob(row);
    },
  );

  app.post(
    '/v1/jobs/:id/renew',
    {
      config: { access: { scopes: ['consumer'], queue: 'job' } },
      schema: {
        tags: ['leases'],
        operationId: 'renewLease',
        summary: 'Extend your lease',
        description:
          'Succeeds only while the job is claimed under `lease_token`; otherwise 409 lease_lost (the lease ' +
          'expired and the job was re-armed, or it was acked, nacked or cancelled). Renew at about a third of ' +
          'the lease. A job with a budget per attempt (timeout_ms) is never renewed past its deadline_at: the ' +
          'expiry is capped there, and once it has passed the answer is 409 deadline_exceeded.',
        params: JobParams,
        body: ref(RenewRequest),
        response: { 200: ok(ref(RenewResponse), 'The new expiry.'), ...errorResponses(404, 409) },
      },
    },
    async (request) => {
      const { id } = request.params;
      const item = {
        id,
        queue: request.jobQueues?.get(id),
        leaseToken: request.body.lease_token,
        leaseMs: request.body.lease_ms,
      };
      const out = await renewLease(app.db, item);
      if (out.outcome === 'deadline_exceeded') throw deadlineExceeded(id);
      const renewed = settle(out, id, 'renew');
      app.metrics.renewed(renewed.queue);
      return { id, lease_expires_at: isoTime(renewed.lease_expires_at), lease_ms: renewed.lease_ms };
    },
  );

  app.post(
    '/v1/jobs/renew',
    {
      config: { access: { scopes: ['consumer'], queue: 'batch' } },
      schema: {
        tags: ['leases'],
        operationId: 'renewLeases',
        summary: 'Extend many leases at once',
        description:
          'Up to 1,000 renewals in one statement, for a worker holding a claimed batch. Each item succeeds or ' +
          "fails on its own: the answer gives every item's outcome (renewed, with its new expiry; lease_lost; " +
          'or not_found) in request order, so one lost lease does not fail the others.',
        body: ref(BatchRenewRequest),
        response: {
          200: ok(ref(BatchRenewResponse), 'Each renewal’s outcome, in request order.'),
          ...errorResponses(),
        },
      },
    },
    async (request) => {
      const { renewals } = request.body;
      checkDistinctIds('renewals', renewals);
      const scope = request.jobQueues;
      const items = renewals.map((r) => ({
        id: r.id,
        queue: scope?.get(r.id),
        leaseToken: r.lease_token,
        leaseMs: r.lease_ms,
      }));
      const outcomes = await settleBatch(items, scope, 'renew', (visible) => renewLeases(app.db, visible));
      const results = outcomes.map((out, i) => {
        const id = items[i]!.id;
        if (out.outcome !== 'done') return { id, outcome: out.outcome };
        app.metrics.renewed(out.value.queue);
        const { lease_expires_at, lease_ms } = out.value;
        return {
          id,
          outcome: 'renewed' as const,
          lease_expires_at: isoTime(lease_expires_at),
          lease_ms,
        };
      });
      const renewed = results.filter((r) => r.outcome === 'renewed').length;
      return { results, renewed, failed: results.length - renewed };
    },
  );

  app.post(
    '/v1/jobs/:id/ack',
    {
      config: { access: { scopes: ['consumer'], queue: 'job' } },
      schema: {
        tags: ['leases'],
        operationId: 'ackJob',
        summary: 'Complete a job',
        description:
          'Marks the job completed and stores `result`. Only the holder of the current lease can ack; anyone ' +
          'else gets 409 lease_lost. Safe to retry: repeating an ack of the same lease answers 200 again.' +
          ackAndClaim('ack'),
        params: JobParams,
        body: ref(AckRequest),
        response: {
          200: ok(ref(JobAndNext), 'The completed job (and, with `next`, the next jobs claimed).'),
          ...errorResponses(404, 409),
        },
      },
    },
    async (request, reply) => {
      const { id } = request.params;
      const { result, next } = request.body;
      const resultJson =
        result === undefined ? undefined : jsonText(result, 'result', config.payloadLimitBytes);
      const item = {
        id,
        queue: request.jobQueues?.get(id),
        leaseToken: request.body.lease_token,
        resultJson,
      };
      const both = next ? await ackAndClaimOnce(request, item, next) : undefined;
      const job = both?.job ?? settle(await ackJob(app.db, acks, item), id, 'ack');
      app.metrics.acked([job]);
      app.wake.notifier.slotsFreed(job.queue, 1);
      if (!next) return toJob(job);
      const claimed = both?.next.length
        ? await app.handOut(request, job.queue, next, both.next)
        : await claimNext(request, reply, job.queue, next);
      return sendWithNext(reply, { ...toJob(job), next: [] }, claimed);
    },
  );

  app.post(
    '/v1/jobs/ack',
    {
      config: { access: { scopes: ['consumer'], queue: 'batch' } },
      schema: {
        tags: ['leases'],
        operationId: 'ackJobs',
        summary: 'Complete many jobs at once',
        description:
          'Up to 1,000 acks in one statement. Each item succeeds or fails on its own: the answer gives every ' +
          "item's outcome (acked, lease_lost or not_found) in request order, so one stale token does not fail " +
          'the others.' +
          ackAndClaim('ack') +
          ' In a batch, every acked job must be of one queue (else 400, before anything is acked), and no ' +
          'next jobs are claimed when any item was lease_lost or none was acked.',
        body: ref(BatchAckRequest),
        response: {
          200: ok(ref(BatchAckResponse), 'Each ack’s outcome, in request order.'),
          ...errorResponses(),
        },
      },
    },
    async (request, reply) => {
      const { next } = request.body;
      checkDistinctIds('acks', request.body.acks);
      const scope = request.jobQueues;
      const items = request.body.acks.map((ack, i) => ({
        id: ack.id,
        queue: scope?.get(ack.id),
        leaseToken: ack.lease_token,
        resultJson:
          ack.result === undefined
            ? undefined
            : jsonText(ack.result, `acks[${i}].result`, config.payloadLimitBytes),
      }));
      // With next: the batch's one queue, found (or refused) before anything is acked.
      const nextQueue = next
        ? await queueOfBatch(
            app.db,
            'acks',
            items.map((item) => item.id),
            scope,
          )
        : undefined;
      const outcomes = await settleBatch(items, scope, 'ack', (visible) => ackJobs(app.db, acks, visible));
      const done = outcomes.flatMap((out) => (out.outcome === 'done' ? [out.value] : []));
      app.metrics.acked(done);
      for (const job of done) app.wake.notifier.slotsFreed(job.queue, 1);
      const results = outcomes.map((out, i) => ({
        id: items[i]!.id,
        outcome: out.outcome === 'done' ? ('acked' as const) : out.outcome,
      }));
      const acked = results.filter((r) => r.outcome === 'acked').length;
      const answer = { results, acked, failed: results.length - acked };
      if (!next) return answer;
      // A stale lease anywhere in the batch claims nothing, as a single ack's 409 would.
      const claim = nextQueue !== undefined && acked > 0 && !results.some((r) => r.outcome === 'lease_lost');
      return sendWithNext(
        reply,
        { ...answer, next: [] },
        claim ? await claimNext(request, reply, nextQueue, next) : [],
      );
    },
  );

  app.post(
    '/v1/jobs/:id/nack',
    {
      config: { access: { scopes: ['consumer'], queue: 'job' } },
      schema: {
        tags: ['leases'],
        operationId: 'nackJob',
        summary: 'Fail this attempt',
        description:
          "Records `error` in the job's history. The job is retried after `retry_in_ms`, or after the queue's " +
          'backoff (exponential, capped, with jitter). When its attempts are used up, or with `dead: true`, it ' +
          'goes to dead instead. Answers the job with its new state and run_at.' +
          ackAndClaim('nack') +
          ' A job nacked with no delay is ready again and may be among them.',
        params: JobParams,
        body: ref(NackRequest),
        response: {
          200: ok(
            ref(JobAndNext),
            'The job with its new state (scheduled, ready or dead) and run_at (and, with `next`, the next jobs claimed).',
          ),
          ...errorResponses(404, 409),
        },
      },
    },
    async (request, reply) => {
      const { id } = request.params;
      const { lease_token, error, retry_in_ms, dead, next } = request.body;
      if (error?.details !== undefined) jsonText(error.details, 'error.details', config.payloadLimitBytes);
      if (error) jsonText(error.message, 'error.message');
      const input = {
        id,
        queue: request.jobQueues?.get(id),
        leaseToken: lease_token,
        error,
        retryInMs: retry_in_ms,
        dead,
      };
      const { job, readyNow } = settle(await nackJob(app.db, input, config), id, 'nack');
      app.metrics.nacked(job.queue, job.state === 'dead' ? 'dead' : 'retry');
      if (readyNow) app.wake.notifier.jobsReady(job.queue, 1);
      else app.wake.notifier.slotsFreed(job.queue, 1);
      if (!next) return toJob(job);
      return sendWithNext(
        reply,
        { ...toJob(job), next: [] },
        await claimNext(request, reply, job.queue, next),
      );
    },
  );

  app.post(
    '/v1/jobs/:id/cancel',
    {
      config: { access: { scopes: ['admin'], queue: 'job' } },
      schema: {
        tags: ['jobs'],
        operationId: 'cancelJob',
        summary: 'Cancel a job that has not finished',
        description:
          'A scheduled, ready or claimed job becomes cancelled; the worker holding a claimed one gets 409 ' +
          'lease_lost on its next renew, ack or nack. Cancelling a cancelled job answers 200 again; a completed ' +
          'or dead one is 409 invalid_state.',
        params: JobParams,
        response: { 200: ok(ref(Job), 'The cancelled job.'), ...errorResponses(404, 409) },
      },
    },
    async (request) => {
      const { id } = request.params;
      const { job, already } = await cancelJob(app.db, id, request.jobQueues?.get(id));
      if (!already) {
        app.metrics.cancelled(job.queue, 1);
        app.wake.notifier.slotsFreed(job.queue, 1);
      }
      return toJob(job);
    },
  );
};

export default jobs;
