import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { queuePatternsOf } from '../auth/api-keys.js';
import { invalidField } from '../errors.js';
import { claimResponseJson, sendJsonText } from '../http/claim-response.js';
import { claimOf, whileConnected } from '../http/claims.js';
import { decodeCursor, encodeCursor } from '../http/cursor.js';
import { jsonText } from '../http/json-input.js';
import { prefersMinimal } from '../http/prefer.js';
import {
  BatchEnqueueAnswer,
  BatchEnqueueHeaders,
  BatchEnqueueRequest,
  BatchEnqueueResponse,
  ClaimRequest,
  ClaimResponse,
  EnqueuedJob,
  EnqueueRequest,
  JobList,
  JobListQuery,
  NewQueueParams,
  QueueParams,
} from '../http/schemas/jobs.js';
import { ref } from '../http/schemas/ref.js';
import { errorResponses, ok } from '../http/schemas/responses.js';
import { toUtcTimestamp } from '../http/timestamps.js';
import { batchEnqueuedIdsJson, dependsOnApplied, toEnqueuedJob, toListedJob } from '../http/views.js';
import type { EnqueueItem } from '../jobs/enqueue/enqueue.js';
import type { ParentRef } from '../jobs/enqueue/item.js';
import { BULK_MATCH_MAX } from '../jobs/limits.js';
import { parseListKey } from '../jobs/list.js';
import { isTraceparent, type TraceContext, traceFromHeaders } from '../jobs/trace-context.js';

/** The jobs of a queue, /v1/queues/{queue}/...: enqueue one, enqueue a batch, claim, list. */

/**
 * An item of the request as the service takes it. Only the fields are translated here; the rules
 * between them (delay_ms or run_at, depends_on's items, a job that could never run) are the
 * service's (jobs/enqueue-rules.ts).
 */
function toItem(
  body: EnqueueRequest,
  field: string,
  payloadLimit: number,
  headerTrace: TraceContext | undefined,
): EnqueueItem {
  const trace = traceOfBody(body, field) ?? headerTrace;
  return {
    payloadJson: jsonText(body.payload, `${field}payload`, payloadLimit),
    group: body.group,
    priority: body.priority ?? 0,
    delayMs: body.delay_ms,
    // The schema's date-time format accepted it, so it converts; PostgreSQL gets UTC.
    runAt: body.run_at === undefined ? undefined : toUtcTimestamp(body.run_at),
    maxAttempts: body.max_attempts,
    idempotencyKey: body.idempotency_key,
    timeoutMs: body.timeout_ms,
    expiresAt: body.expires_at === undefined ? undefined : toUtcTimestamp(body.expires_at),
    expiresInMs: body.expires_in_ms,
    uniqueKey: body.unique_key,
    onConflict: body.on_conflict,
    onParentFailure: body.on_parent_failure,
    ...(trace ? { meta: { trace } } : {}),
    ...(body.depends_on
      ? {
          dependsOn: body.depends_on.map(
            (p): ParentRef => (typeof p === 'string' ? { id: p } : { item: p.item }),
          ),
        }
      : {}),
  };
}

/** The trace context a job gives in its own fields; a 400 naming the field when they do not hold. */
function traceOfBody(body: EnqueueRequest, field: string): TraceContext | undefined {
  if (body.traceparent === undefined) {
    if (body.tracestate !== undefined) throw invalidField(`${field}tracestate`, 'needs traceparent');
    return undefined;
  }
  if (!isTraceparent(body.traceparent)) {
    throw invalidField(
      `${field}traceparent`,
      'is not a W3C traceparent (version ff, or a zero trace or parent id)',
    );
  }
  return body.tracestate === undefined
    ? { traceparent: body.traceparent }
    : { traceparent: body.traceparent, tracestate: body.tracestate };
}

const queueJobs: FastifyPluginAsyncTypebox = async (app) => {
  const { config } = app;
  const { jobs } = app.service;

  app.post(
    '/v1/queues/:queue/jobs',
    {
      config: { access: { scopes: ['producer'], queue: 'param' } },
      schema: {
        tags: ['jobs'],
        operationId: 'enqueueJob',
        summary: 'Enqueue a job',
        description:
          'Adds one job. It is `ready` at once, or `scheduled` when `run_at`/`delay_ms` puts it in the future, or ' +
          '`waiting` while a job it names in `depends_on` has not completed. ' +
          'An unknown queue is created with default settings unless the server runs with auto-create off. ' +
          'With an `idempotency_key` already used on this queue (within its retention), nothing is created and ' +
          'the original job is returned with 200. With a `unique_key` held by a waiting job of this queue, that ' +
          'job is returned with 200 (with `on_conflict: replace`, after taking this payload, priority and run_at).',
        params: NewQueueParams,
        body: ref(EnqueueRequest),
        response: {
          201: ok(ref(EnqueuedJob), 'Created: the new job.'),
          200: ok(
            ref(EnqueuedJob),
            'The idempotency key matched (the original job) or the unique key a waiting job (that job); nothing was created.',
          ),
          ...errorResponses(400, 404, 413, 415),
        },
      },
    },
    async (request, reply) => {
      const { queue } = request.params;
      const headerTrace = traceFromHeaders(request.headers);
      const item = toItem(request.body, '', config.payloadLimitBytes, headerTrace);
      const [result] = await jobs.enqueue(queue, [item], 'api', {
        parentScope: queuePatternsOf(request.apiKey),
        field: () => '',
        batch: false,
        trace: headerTrace,
      });
      const { job, created } = result!;
      return reply
        .code(created ? 201 : 200)
        .send({ ...toEnqueuedJob(job), ...dependsOnApplied(item, created) });
    },
  );

  app.post(
    '/v1/queues/:queue/jobs/batch',
    {
      config: {
        access: { scopes: ['producer'], queue: 'param' },
        // The served serialiser is the full representation's; the minimal one is written as text.
        documentedResponses: {
          201: ok(
            ref(BatchEnqueueAnswer),
            'The jobs, in request order (with `Prefer: return=minimal`, their ids only).',
          ),
        },
      },
      schema: {
        tags: ['jobs'],
        operationId: 'enqueueJobs',
        summary: 'Enqueue up to 1,000 jobs in one transaction',
        description:
          'All or nothing: an invalid item rejects the whole batch with 400 naming its index and field. ' +
          'Items may depend on earlier items of the same request (`depends_on: [{"item": 0}]`), so a whole ' +
          'workflow graph is enqueued at once. ' +
          'The answer lists the jobs in request order; `created` is false for an item whose idempotency key ' +
          'matched an existing job. A producer that keeps only ids sends `Prefer: return=minimal` and gets ' +
          "each job's id and `created` alone, for less work on both sides.",
        params: NewQueueParams,
        headers: BatchEnqueueHeaders,
        body: ref(BatchEnqueueRequest),
        response: {
          201: ok(ref(BatchEnqueueResponse), 'The jobs, in request order.'),
          ...errorResponses(400, 404, 413, 415),
        },
      },
    },
    async (request, reply) => {
      const { queue } = request.params;
      const headerTrace = traceFromHeaders(request.headers);
      const items = request.body.jobs.map((job, i) =>
        toItem(job, `jobs[${i}].`, config.payloadLimitBytes, headerTrace),
      );
      const results = await jobs.enqueue(queue, items, 'api', {
        parentScope: queuePatternsOf(request.apiKey),
        field: (i) => `jobs[${i}].`,
        batch: true,
        trace: headerTrace,
      });
      // An item answered by an existing job (its key) had its depends_on left out: say so per item.
      const answers = results.map((r, i) => ({ ...r, ...dependsOnApplied(items[i]!, r.created) }));
      if (prefersMinimal(request.headers.prefer)) {
        reply.code(201).header('preference-applied', 'return=minimal');
        return sendJsonText(reply, batchEnqueuedIdsJson(answers));
      }
      return reply.code(201).send({
        jobs: answers.map(({ job, ...rest }) => ({ ...toEnqueuedJob(job), ...rest })),
      });
    },
  );

  app.post(
    '/v1/queues/:queue/claim',
    {
      config: { access: { scopes: ['consumer'], queue: 'param' } },
      schema: {
        tags: ['jobs'],
        operationId: 'claimJobs',
        summary: 'Claim ready jobs under a lease',
        description:
          'Hands out up to `max_jobs` ready jobs, highest priority first, then oldest `run_at`, each with a fresh ' +
          '`lease_token`. Renew before `lease_expires_at`, then ack or nack. With `wait_ms`, waits up to that long ' +
          'for a job when none is ready (long-poll) and answers an empty list if none comes. A paused queue ' +
          'hands out nothing. The body may be omitted (all defaults).',
        params: QueueParams,
        body: ref(ClaimRequest),
        response: {
          200: ok(ref(ClaimResponse), 'The claimed jobs; an empty list when none was ready within wait_ms.'),
          ...errorResponses(400, 413, 415),
        },
      },
      preValidation: async (request) => {
        request.body ??= {};
      },
    },
    // Written by hand with the payloads spliced in as stored (http/claim-response.ts).
    async (request, reply) =>
      sendJsonText(
        reply,
        claimResponseJson(
          await whileConnected(reply, (signal) =>
            jobs.claim({ queue: request.params.queue, ...claimOf(request, request.body, signal) }),
          ),
        ),
      ),
  );

  app.get(
    '/v1/queues/:queue/jobs',
    {
      config: { access: { scopes: ['producer', 'consumer'], queue: 'param' } },
      schema: {
        tags: ['queues'],
        operationId: 'listJobs',
        summary: "List a queue's jobs in one state",
        description:
          'Keyset pagination: pass next_cursor as cursor for the next page. A job appears at most once across ' +
          'pages even while jobs are added. Each page is one short index scan; no transaction spans pages.',
        params: QueueParams,
        querystring: JobListQuery,
        response: { 200: ok(ref(JobList), 'A page of jobs.'), ...errorResponses(400) },
      },
    },
    async (request) => {
      const { queue } = request.params;
      const { state, group, cursor, order, include_payload, count } = request.query;
      const limit = request.query.limit ?? 100;
      const page = await jobs.list({
        queue,
        state,
        group,
        limit,
        desc: order === 'desc',
        after: cursor === undefined ? undefined : parseListKey(state, decodeCursor(cursor)),
      });
      const list = {
        jobs: page.rows.map((row) => toListedJob(row, include_payload)),
        next_cursor: page.next ? encodeCursor(page.next) : null,
      };
      if (!count) return list;
      const counted_at = new Date().toISOString();
      const total = await jobs.countList({ queue, state, group }, BULK_MATCH_MAX);
      return {
        ...list,
        total: Math.min(total, BULK_MATCH_MAX),
        total_capped: total > BULK_MATCH_MAX,
        counted_at,
      };
    },
  );
};

export default queueJobs;
