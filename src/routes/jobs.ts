import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { DomainError, invalidField, jobNotFound, leaseLost } from '../errors.js';
import { jsonText } from '../http/json-input.js';
import {
  AckRequest,
  BatchAckRequest,
  BatchAckResponse,
  BatchRenewRequest,
  BatchRenewResponse,
  Job,
  JobParams,
  NackRequest,
  RenewRequest,
  RenewResponse,
} from '../http/schemas/jobs.js';
import { ref } from '../http/schemas/ref.js';
import { errorResponses, ok } from '../http/schemas/responses.js';
import { type AckedJob, alreadyAcked } from '../jobs/ack.js';
import { cancelJob } from '../jobs/cancel.js';
import { toJob } from '../jobs/job-row.js';
import { nackJob } from '../jobs/nack.js';
import { getJob, queuesOfJobs } from '../jobs/read.js';
import { renewLease, renewLeases } from '../jobs/renew.js';
import { AckGroups } from '../jobs/statement-groups.js';

/** Routes under /v1/jobs: read a job, and the lease holder's renew, ack and nack; cancel. */

/**
 * The items of a batch route (`acks`, `renewals`) each name a job once: a repeated id is 400 naming
 * the item (two outcomes for one job would be ambiguous). Ids are canonical (the schema refuses
 * leading zeros), so "1" and "01" cannot pass as two jobs.
 */
function checkBatchIds(field: string, items: { id: string }[]): void {
  const seen = new Set<string>();
  for (const [i, item] of items.entries()) {
    if (seen.has(item.id)) throw invalidField(`${field}[${i}].id`, `repeats job ${item.id}`);
    seen.add(item.id);
  }
}

/** Items a queue-limited key may act on; the others are answered not_found (see plugins/auth.ts). */
function visible<T extends { id: string }>(items: T[], hidden: ReadonlySet<string> | undefined): T[] {
  return hidden && hidden.size > 0 ? items.filter((item) => !hidden.has(item.id)) : items;
}

const jobs: FastifyPluginAsyncTypebox = async (app) => {
  const { config } = app;
  // Concurrent acks share one statement and one commit (src/jobs/statement-groups.ts).
  const acks = new AckGroups(app.db);

  /**
   * Of the jobs a lease-guarded write did not touch, those that exist: their leases were lost
   * (counted by queue). The others never existed.
   */
  const lostLeases = async (ids: string[], operation: 'renew' | 'ack' | 'nack'): Promise<Set<string>> => {
    const queues = await queuesOfJobs(app.db, ids);
    for (const queue of queues.values()) app.metrics.leaseLost(queue, operation);
    return new Set(queues.keys());
  };

  /** After a lease-guarded write touched nothing: 409 if the job exists, 404 if it never did. */
  const leaseFailure = async (id: string, operation: 'renew' | 'ack' | 'nack'): Promise<DomainError> =>
    (await lostLeases([id], operation)).has(id) ? leaseLost(id) : jobNotFound(id);

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
      const row = await getJob(app.db, request.params.id);
      if (!row) throw jobNotFound(request.params.id);
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
          'the lease.',
        params: JobParams,
        body: RenewRequest,
        response: { 200: ok(RenewResponse, 'The new expiry.'), ...errorResponses(400, 404, 409, 413, 415) },
      },
    },
    async (request) => {
      const { id } = request.params;
      const renewed = await renewLease(app.db, id, request.body.lease_token, request.body.lease_ms);
      if (!renewed) throw await leaseFailure(id, 'renew');
      app.metrics.renewed(renewed.queue);
      return { id, lease_expires_at: renewed.lease_expires_at.toISOString(), lease_ms: renewed.lease_ms };
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
        body: BatchRenewRequest,
        response: {
          200: ok(BatchRenewResponse, 'Each renewal’s outcome, in request order.'),
          ...errorResponses(400, 413, 415),
        },
      },
    },
    async (request) => {
      const { renewals } = request.body;
      checkBatchIds('renewals', renewals);
      const items = visible(renewals, request.hiddenJobIds);
      const answers = await renewLeases(
        app.db,
        items.map((r) => ({ id: r.id, leaseToken: r.lease_token, leaseMs: r.lease_ms })),
      );
      const byId = new Map(answers.flatMap((a) => (a ? [[a.id, a] as const] : [])));
      for (const renewed of byId.values()) app.metrics.renewed(renewed.queue);
      const lost = await lostLeases(
        items.filter((r) => !byId.has(r.id)).map((r) => r.id),
        'renew',
      );
      const results = renewals.map((r) => {
        const renewed = byId.get(r.id);
        if (renewed) {
          return {
            id: r.id,
            outcome: 'renewed' as const,
            lease_expires_at: renewed.lease_expires_at.toISOString(),
            lease_ms: renewed.lease_ms,
          };
        }
        return { id: r.id, outcome: lost.has(r.id) ? ('lease_lost' as const) : ('not_found' as const) };
      });
      return { results, renewed: byId.size, failed: renewals.length - byId.size };
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
          'else gets 409 lease_lost. Safe to retry: repeating an ack of the same lease answers 200 again.',
        params: JobParams,
        body: AckRequest,
        response: { 200: ok(ref(Job), 'The completed job.'), ...errorResponses(400, 404, 409, 413, 415) },
      },
    },
    async (request) => {
      const { id } = request.params;
      const resultJson =
        request.body.result === undefined
          ? undefined
          : jsonText(request.body.result, 'result', config.payloadLimitBytes);
      const item = { id, leaseToken: request.body.lease_token, resultJson };
      const row = await acks.ack(item);
      if (row) {
        app.metrics.acked([row]);
        return toJob(row);
      }
      const repeated = (await alreadyAcked(app.db, [item])).get(id);
      if (repeated) return toJob(repeated);
      throw await leaseFailure(id, 'ack');
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
          'the others.',
        body: BatchAckRequest,
        response: {
          200: ok(BatchAckResponse, 'Each ack’s outcome, in request order.'),
          ...errorResponses(400, 413, 415),
        },
      },
    },
    async (request) => {
      checkBatchIds('acks', request.body.acks);
      const all = request.body.acks.map((ack, i) => ({
        id: ack.id,
        leaseToken: ack.lease_token,
        resultJson:
          ack.result === undefined
            ? undefined
            : jsonText(ack.result, `acks[${i}].result`, config.payloadLimitBytes),
      }));
      const items = visible(all, request.hiddenJobIds);
      const answers = await acks.ackBatch(items);
      const done = new Map<string, AckedJob>(answers.flatMap((a) => (a ? [[a.id, a] as const] : [])));
      app.metrics.acked([...done.values()]);
      const repeated = await alreadyAcked(
        app.db,
        items.filter((i) => !done.has(i.id)),
      );
      for (const [id, row] of repeated) done.set(id, row);
      const lost = await lostLeases(
        items.filter((i) => !done.has(i.id)).map((i) => i.id),
        'ack',
      );
      const results = all.map((i) => ({
        id: i.id,
        outcome: done.has(i.id)
          ? ('acked' as const)
          : lost.has(i.id)
            ? ('lease_lost' as const)
            : ('not_found' as const),
      }));
      return { results, acked: done.size, failed: all.length - done.size };
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
          'goes to dead instead. Answers the job with its new state and run_at.',
        params: JobParams,
        body: NackRequest,
        response: {
          200: ok(ref(Job), 'The job with its new state (scheduled, ready or dead) and run_at.'),
          ...errorResponses(400, 404, 409, 413, 415),
        },
      },
    },
    async (request) => {
      const { id } = request.params;
      const { lease_token, error, retry_in_ms, dead } = request.body;
      if (error?.details !== undefined) jsonText(error.details, 'error.details', config.payloadLimitBytes);
      if (error) jsonText(error.message, 'error.message');
      const outcome = await nackJob(
        app.db,
        { id, leaseToken: lease_token, error, retryInMs: retry_in_ms, dead },
        config,
      );
      if (!outcome) throw await leaseFailure(id, 'nack');
      app.metrics.nacked(outcome.job.queue, outcome.job.state === 'dead' ? 'dead' : 'retry');
      if (outcome.readyNow) app.wake.notifier.jobsReady(outcome.job.queue, 1);
      return toJob(outcome.job);
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
      const cancelled = await cancelJob(app.db, id);
      if (cancelled) {
        app.metrics.cancelled(cancelled.queue, 1);
        return toJob(cancelled);
      }
      const row = await getJob(app.db, id);
      if (!row) throw jobNotFound(id);
      if (row.state === 'cancelled') return toJob(row);
      throw new DomainError('invalid_state', `job ${id} is already ${row.state} and cannot be cancelled`);
    },
  );
};

export default jobs;
