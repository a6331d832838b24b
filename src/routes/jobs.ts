import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { queuePatternsOf } from '../auth/api-keys.js';
import { deadlineExceeded, invalidField, jobNotFound, leaseLost } from '../errors.js';
import { sendJsonText, withNextJson } from '../http/claim-response.js';
import { claimOf, whileConnected } from '../http/claims.js';
import { isoTime } from '../http/iso-time.js';
import { jsonText } from '../http/json-input.js';
import {
  AwaitRequest,
  AwaitResponse,
  Job,
  JobGraph,
  JobParams,
  JobReadQuery,
  RelatedJobList,
  RelatedJobsQuery,
} from '../http/schemas/jobs.js';
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
import { toJob, toRelatedJob } from '../http/views.js';
import type { ClaimedRow } from '../jobs/claim/types.js';
import { checkDistinctIds, type LeaseOutcome } from '../jobs/lease-outcome.js';
import { GRAPH_MAX_JOBS, MAX_AWAIT_IDS, PROGRESS_MAX_BYTES } from '../jobs/limits.js';
import { traceFromHeaders } from '../jobs/trace-context.js';

/**
 * Routes under /v1/jobs: read a job (and await its end), await many; the lease holder's renew, ack
 * and nack; cancel.
 */

/** What `next` does, for the descriptions of the ack, the batch ack and the nack. */
const ackAndClaim = (verb: 'ack' | 'nack') =>
  ' With `next` (a claim request), also claims the next jobs of the same queue under fresh leases and ' +
  'answers them in `next`, as POST /v1/queues/{queue}/claim would (long-poll, flow control and paused ' +
  `queues included). The ${verb} is committed whatever happens to the claim: if the claim fails, ` +
  'the answer is still 200 with an empty `next`. A lost lease (409) claims nothing.';

/**
 * A lease write's `progress` as JSON text, checked as every progress is (size, then content: 413 or
 * 400 naming `field`); undefined when the request left it out.
 */
const progressText = (progress: unknown, field: string) =>
  progress === undefined ? undefined : jsonText(progress, field, PROGRESS_MAX_BYTES);

/** Whose waiter a request is, for the caps per key: its API key ('' without keys: one key for all). */
const keyOf = (request: FastifyRequest) => request.apiKey?.name ?? '';

const jobs: FastifyPluginAsyncTypebox = async (app) => {
  const { config } = app;
  const { leases } = app.service;

  /** A single lease write's answer: its value, or 409 lease_lost or 404 (the service counted it). */
  const settle = <T>(out: LeaseOutcome<T>, id: string): T => {
    if (out.outcome === 'done') return out.value;
    if (out.outcome === 'not_found') throw jobNotFound(id);
    throw leaseLost(id);
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
        summary: 'Read a job in any state, or await its end',
        description:
          'Live or finished: state, attempts, error history, result, progress and timestamps. Never the lease ' +
          'token. With `wait_ms`, waits (a long-poll holding no database connection) until the job has ' +
          'finished (completed, dead or cancelled) and answers it with its result; when the wait runs out first, ' +
          'answers the job as it is then, still live: look at `state`. A job finished on another replica ' +
          'ends the wait as quickly as one finished on this one. Requests awaiting jobs are capped per API key ' +
          'and per replica (BATON_AWAIT_MAX_WAITERS_PER_KEY, BATON_AWAIT_MAX_WAITERS): past the cap, 429 ' +
          'too_many_waiters with Retry-After (a read without `wait_ms` is never refused).',
        params: JobParams,
        querystring: JobReadQuery,
        response: {
          200: ok(
            ref(Job),
            'The job, without its lease token (with wait_ms: finished, or as it is when the wait ran out).',
          ),
          ...errorResponses(404, 429),
        },
      },
    },
    async (request, reply) => {
      const { id } = request.params;
      const queue = request.jobQueues?.get(id);
      const waitMs = request.query.wait_ms ?? 0;
      const row =
        waitMs === 0
          ? await app.service.jobs.read(id, queue)
          : (
              await whileConnected(reply, (signal) =>
                app.service.jobs.awaitFinished({
                  items: [{ id, queue }],
                  waitMs,
                  key: keyOf(request),
                  signal,
                }),
              )
            ).jobs.get(id);
      if (!row) throw jobNotFound(id);
      const dependencies = await app.service.jobs.dependencies(id, queuePatternsOf(request.apiKey));
      return dependencies ? { ...toJob(row), dependencies } : toJob(row);
    },
  );

  for (const direction of ['parents', 'children'] as const) {
    app.get(
      `/v1/jobs/:id/${direction}`,
      {
        config: { access: { scopes: ['producer', 'consumer'], queue: 'job' } },
        schema: {
          tags: ['jobs'],
          operationId: direction === 'parents' ? 'listJobParents' : 'listJobChildren',
          summary: direction === 'parents' ? "A job's parents, with their results" : "A job's children",
          description:
            direction === 'parents'
              ? 'The jobs named in depends_on, in id order, each in its state now, with the outcome the ' +
                'dependency recorded and, once completed, its result: a claimed child reads what its parents ' +
                'produced here (fan-in). Keyset pages of at most 100 (pass next_cursor as cursor); a result ' +
                'is at most what an ack may carry (BATON_PAYLOAD_LIMIT_BYTES), so a page is at most 100 times ' +
                'that. A parent pruned past its retention has state null and no result.'
              : 'The jobs that named this one in depends_on, in id order, each in its state now. Keyset pages ' +
                'of at most 100 (pass next_cursor as cursor).',
          params: JobParams,
          querystring: RelatedJobsQuery,
          response: { 200: ok(ref(RelatedJobList), `A page of ${direction}.`), ...errorResponses(400, 404) },
        },
      },
      async (request) => {
        const { id } = request.params;
        if (!(await app.service.jobs.read(id, request.jobQueues?.get(id)))) throw jobNotFound(id);
        const page = await app.service.jobs.related(id, direction, {
          after: request.query.cursor,
          limit: request.query.limit ?? 100,
          scope: queuePatternsOf(request.apiKey),
        });
        return { jobs: page.jobs.map(toRelatedJob), next_cursor: page.next ?? null };
      },
    );
  }

  app.get(
    '/v1/jobs/:id/graph',
    {
      config: { access: { scopes: ['producer', 'consumer'], queue: 'job' } },
      schema: {
        tags: ['jobs'],
        operationId: 'getJobGraph',
        summary: "A job's workflow graph",
        description:
          'The jobs this one is linked to by dependencies, either way and at any distance (its parents, their ' +
          `parents, its children, their other parents…), nearest first, at most ${GRAPH_MAX_JOBS}, each in its ` +
          'state now, with the dependencies among them; `truncated` says the graph holds more. A queue-limited ' +
          "key's graph goes only through jobs of its queues. The dashboard draws it on a job's page.",
        params: JobParams,
        response: { 200: ok(ref(JobGraph), 'The graph, or the job alone.'), ...errorResponses(404) },
      },
    },
    async (request) => {
      const { id } = request.params;
      const row = await app.service.jobs.read(id, request.jobQueues?.get(id));
      if (!row) throw jobNotFound(id);
      return app.service.jobs.graph({ id, queue: row.queue }, queuePatternsOf(request.apiKey));
    },
  );

  app.post(
    '/v1/jobs/await',
    {
      config: { access: { scopes: ['producer', 'consumer'], queue: 'batch' } },
      schema: {
        tags: ['jobs'],
        operationId: 'awaitJobs',
        summary: 'Await the end of many jobs',
        description:
          `Up to ${MAX_AWAIT_IDS} jobs. Waits up to \`wait_ms\` (a long-poll holding no database connection) until ` +
          'every one of them has finished (completed, dead or cancelled), then answers them all with their ' +
          'results; when the wait runs out first, answers them as they are then (`unfinished` counts those still ' +
          'live). Ids of no job, or of jobs in queues the key may not use, are listed in `not_found` and not ' +
          'awaited. The answer is bounded: jobs keep their payload, result and errors in request order until ' +
          'these add up to BATON_AWAIT_ANSWER_MAX_BYTES (8 MiB by default; the first job always keeps them); the ' +
          'jobs after come without them (payload and result null, errors empty) and their ids are listed in ' +
          '`omitted`: read each with GET /v1/jobs/{id}. Requests awaiting jobs are capped per API key and per ' +
          'replica, in requests and in jobs awaited (BATON_AWAIT_MAX_*): past a cap, 429 too_many_waiters with ' +
          'Retry-After.',
        body: ref(AwaitRequest),
        response: {
          200: ok(ref(AwaitResponse), 'The jobs found, in request order, and the ids of none.'),
          ...errorResponses(429),
        },
      },
    },
    async (request, reply) => {
      const { ids, wait_ms: waitMs = 0 } = request.body;
      const seen = new Set<string>();
      for (const [i, id] of ids.entries()) {
        if (seen.has(id)) throw invalidField(`ids[${i}]`, `repeats job ${id}`);
        seen.add(id);
      }
      // A queue-limited key sees only the jobs of its queues (plugins/auth.ts); the others are not found.
      const scope = request.jobQueues;
      const items = (scope ? ids.filter((id) => scope.has(id)) : ids).map((id) => ({
        id,
        queue: scope?.get(id),
      }));
      const { jobs: found, omitted } = await whileConnected(reply, (signal) =>
        app.service.jobs.awaitFinished({ items, waitMs, key: keyOf(request), signal }),
      );
      const jobs = ids.flatMap((id) => {
        const row = found.get(id);
        return row ? [toJob(row)] : [];
      });
      const finished = jobs.filter((job) => job.finished_at !== null).length;
      return {
        jobs,
        not_found: ids.filter((id) => !found.has(id)),
        finished,
        unfinished: jobs.length - finished,
        omitted,
      };
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
          'expiry is capped there, and once it has passed the answer is 409 deadline_exceeded. With `progress`, ' +
          'also keeps how far the worker got on the job (latest wins).',
        params: JobParams,
        body: ref(RenewRequest),
        response: { 200: ok(ref(RenewResponse), 'The new expiry.'), ...errorResponses(404, 409) },
      },
    },
    async (request) => {
      const { id } = request.params;
      const { progress } = request.body;
      const item = {
        id,
        queue: request.jobQueues?.get(id),
        leaseToken: request.body.lease_token,
        leaseMs: request.body.lease_ms,
        progressJson: progressText(progress, 'progress'),
      };
      const [out] = await leases.renew([item]);
      if (out!.outcome === 'deadline_exceeded') throw deadlineExceeded(id);
      const renewed = settle(out!, id);
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
          'or not_found) in request order, so one lost lease does not fail the others. Each item may carry ' +
          '`progress`, kept on its job (latest wins).',
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
      const items = renewals.map((r, i) => ({
        id: r.id,
        queue: scope?.get(r.id),
        leaseToken: r.lease_token,
        leaseMs: r.lease_ms,
        progressJson: progressText(r.progress, `renewals[${i}].progress`),
      }));
      const outcomes = await leases.renew(items, scope);
      const results = outcomes.map((out, i) => {
        const id = items[i]!.id;
        if (out.outcome !== 'done') return { id, outcome: out.outcome };
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
          'Marks the job completed and stores `result`. With `progress`, the completed job keeps it as its ' +
          'final progress (null clears it); without, it keeps what the last renewal reported. Only the holder ' +
          'of the current lease can ack; anyone else gets 409 lease_lost. Safe to retry: repeating an ack of ' +
          "the same lease answers 200 again (the first ack's result and progress stand)." +
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
      const { result, progress, next } = request.body;
      const resultJson =
        result === undefined ? undefined : jsonText(result, 'result', config.payloadLimitBytes);
      const item = {
        id,
        queue: request.jobQueues?.get(id),
        leaseToken: request.body.lease_token,
        resultJson,
        progressJson: progressText(progress, 'progress'),
      };
      const trace = traceFromHeaders(request.headers);
      if (!next) return toJob(settle((await leases.ack(item, undefined, trace)).outcome, id));
      const acked = await whileConnected(reply, (signal) =>
        leases.ack(item, claimOf(request, next, signal, trace), trace),
      );
      return sendWithNext(reply, { ...toJob(settle(acked.outcome, id)), next: [] }, acked.next);
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
          'the others. Each item may carry `result` and `progress` (its final progress, as on the single ack).' +
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
        progressJson: progressText(ack.progress, `acks[${i}].progress`),
      }));
      // With next, the batch's one queue is found (or refused) before anything is acked.
      const { outcome: outcomes, next: claimed } = await whileConnected(reply, (signal) =>
        leases.ackBatch(items, {
          scope,
          next: next && claimOf(request, next, signal),
          trace: traceFromHeaders(request.headers),
        }),
      );
      const results = outcomes.map((out, i) => ({
        id: items[i]!.id,
        outcome: out.outcome === 'done' ? ('acked' as const) : out.outcome,
      }));
      const acked = results.filter((r) => r.outcome === 'acked').length;
      const answer = { results, acked, failed: results.length - acked };
      if (!next) return answer;
      return sendWithNext(reply, { ...answer, next: [] }, claimed);
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
          'goes to dead instead. With `give_back: true` (a worker shutting down), the job is instead ready ' +
          'again at once, in its old place in claim order, its attempt not counted and no error recorded. ' +
          'With `progress`, the job keeps how far this attempt got (null clears it). ' +
          'Answers the job with its new state and run_at.' +
          ackAndClaim('nack') +
          ' A job nacked with no delay is ready again and may be among them.',
        params: JobParams,
        body: ref(NackRequest),
        response: {
          200: ok(
            ref(JobAndNext),
            'The job with its new state (scheduled, ready or dead; ready with its attempts back down when given ' +
              'back) and run_at (and, with `next`, the next jobs claimed).',
          ),
          ...errorResponses(404, 409),
        },
      },
    },
    async (request, reply) => {
      const { id } = request.params;
      const { lease_token, error, retry_in_ms, dead, give_back, progress, next } = request.body;
      if (give_back) {
        // A job given back did not fail: nothing to record, no delay to choose, no death to ask for.
        if (error !== undefined) throw invalidField('error', 'cannot be given with give_back');
        if (retry_in_ms !== undefined) throw invalidField('retry_in_ms', 'cannot be given with give_back');
        if (dead) throw invalidField('dead', 'cannot be true with give_back');
      }
      if (error?.details !== undefined) jsonText(error.details, 'error.details', config.payloadLimitBytes);
      if (error) jsonText(error.message, 'error.message');
      const input = {
        id,
        queue: request.jobQueues?.get(id),
        leaseToken: lease_token,
        error,
        retryInMs: retry_in_ms,
        dead,
        giveBack: give_back,
        progressJson: progressText(progress, 'progress'),
      };
      const trace = traceFromHeaders(request.headers);
      if (!next) return toJob(settle((await leases.nack(input, undefined, trace)).outcome, id).job);
      const nacked = await whileConnected(reply, (signal) =>
        leases.nack(input, claimOf(request, next, signal, trace), trace),
      );
      return sendWithNext(reply, { ...toJob(settle(nacked.outcome, id).job), next: [] }, nacked.next);
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
      return toJob(await leases.cancel(id, request.jobQueues?.get(id)));
    },
  );
};

export default jobs;
