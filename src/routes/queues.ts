import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { queuePatternsOf } from '../auth/api-keys.js';
import { invalidField } from '../errors.js';
import { decodeCursor, encodeCursor } from '../http/cursor.js';
import { NewQueueParams, QueueParams } from '../http/schemas/jobs.js';
import {
  DeletedQueue,
  DeleteQueueQuery,
  PurgeResponse,
  Queue,
  QueueConfigRequest,
  QueueList,
  QueueListQuery,
  RedriveRequest,
  RedriveResponse,
} from '../http/schemas/queues.js';
import { ref } from '../http/schemas/ref.js';
import { errorResponses, ok } from '../http/schemas/responses.js';
import { toUtcTimestamp } from '../http/timestamps.js';
import { toQueue } from '../http/views.js';
import { isQueueName } from '../jobs/limits.js';
import type { QueueChanges } from '../queues/queue-store.js';

/** Operating queues: configure, pause, inspect, list jobs, delete, purge, redrive. */

const badCursor = () => invalidField('cursor', 'is not a cursor this server issued');

const queues: FastifyPluginAsyncTypebox = async (app) => {
  const { config } = app;
  const { queues: useCases } = app.service;
  const view = async (name: string) => {
    const found = await useCases.get(name);
    return toQueue(found.queue, found.stats, config);
  };

  app.get(
    '/v1/queues',
    {
      config: { access: { scopes: ['producer', 'consumer'] } },
      schema: {
        tags: ['queues'],
        operationId: 'listQueues',
        summary: 'List queues with their settings and counts',
        description: 'In name order, a page at a time (limit up to 500; pass next_cursor as cursor).',
        querystring: QueueListQuery,
        response: { 200: ok(ref(QueueList), 'A page of queues.'), ...errorResponses(400) },
      },
    },
    async (request) => {
      const limit = request.query.limit ?? 100;
      let after: string | undefined;
      if (request.query.cursor !== undefined) {
        after = decodeCursor(request.query.cursor)?.[0];
        if (after === undefined || !isQueueName(after)) throw badCursor();
      }
      // A key limited to some queues sees only those: the filter is in the query, so pages are
      // full and the cursor comes from a row the key may see.
      const rows = await useCases.list(limit, after, queuePatternsOf(request.apiKey));
      const last = rows.at(-1);
      return {
        queues: rows.map((r) => toQueue(r.queue, r.stats, config)),
        next_cursor: rows.length === limit && last ? encodeCursor([last.queue.name]) : null,
      };
    },
  );

  app.get(
    '/v1/queues/:queue',
    {
      config: { access: { scopes: ['producer', 'consumer'], queue: 'param' } },
      schema: {
        tags: ['queues'],
        operationId: 'getQueue',
        summary: 'A queue: settings and stats',
        params: QueueParams,
        response: { 200: ok(ref(Queue), 'The queue.'), ...errorResponses(404) },
      },
    },
    async (request) => view(request.params.queue),
  );

  app.put(
    '/v1/queues/:queue',
    {
      config: { access: { scopes: ['admin'], queue: 'param' } },
      schema: {
        tags: ['queues'],
        operationId: 'putQueue',
        summary: 'Create or configure a queue',
        description:
          'Creates the queue (201) or updates it (200). A queue configured here is explicitly managed: the ' +
          'leader never collects it. Changes apply at once on every replica (settings are read per request).',
        params: NewQueueParams,
        body: ref(QueueConfigRequest),
        response: {
          200: ok(ref(Queue), 'Updated.'),
          201: ok(ref(Queue), 'Created.'),
          ...errorResponses(400, 413, 415),
        },
      },
    },
    async (request, reply) => {
      const { queue } = request.params;
      const body = request.body;
      const changes: QueueChanges = {
        lease_ms: body.lease_ms,
        max_attempts: body.max_attempts,
        backoff_base_ms: body.backoff?.base_ms,
        backoff_max_ms: body.backoff?.max_ms,
        backoff_jitter: body.backoff?.jitter,
        completed_retention_ms: body.retention?.completed_ms,
        dead_retention_ms: body.retention?.dead_ms,
        paused: body.paused,
        timeout_ms: body.timeout_ms,
        concurrency_limit: body.concurrency_limit,
        rate_limit: body.rate_limit === undefined ? undefined : (body.rate_limit?.limit ?? null),
        rate_period_ms: body.rate_limit === undefined ? undefined : (body.rate_limit?.period_ms ?? null),
        group_concurrency_limit: body.group_concurrency_limit,
        group_rate_limit:
          body.group_rate_limit === undefined ? undefined : (body.group_rate_limit?.limit ?? null),
        group_rate_period_ms:
          body.group_rate_limit === undefined ? undefined : (body.group_rate_limit?.period_ms ?? null),
      };
      for (const key of Object.keys(changes) as (keyof QueueChanges)[]) {
        if (changes[key] === undefined) delete changes[key];
      }
      const { created } = await app.service.queues.configure(queue, changes);
      return reply.code(created ? 201 : 200).send(await view(queue));
    },
  );

  for (const [action, paused] of [
    ['pause', true],
    ['resume', false],
  ] as const) {
    app.post(
      `/v1/queues/:queue/${action}`,
      {
        config: { access: { scopes: ['admin'], queue: 'param' } },
        schema: {
          tags: ['queues'],
          operationId: `${action}Queue`,
          summary: paused ? 'Pause a queue: hand out nothing' : 'Resume a paused queue',
          description: paused
            ? 'A paused queue still accepts enqueues and its in-flight leases carry on (renew, ack, nack), but ' +
              'claims get nothing until it is resumed.'
            : 'Claims get jobs again; waiting long-polls are woken.',
          params: QueueParams,
          response: { 200: ok(ref(Queue), 'The queue.'), ...errorResponses(404) },
        },
      },
      async (request) => {
        const { queue } = request.params;
        await app.service.queues.setPaused(queue, paused);
        return view(queue);
      },
    );
  }

  app.delete(
    '/v1/queues/:queue',
    {
      config: { access: { scopes: ['admin'], queue: 'param' } },
      schema: {
        tags: ['queues'],
        operationId: 'deleteQueue',
        summary: 'Delete a queue',
        description:
          'Refuses with 409 queue_not_empty while the queue has live (scheduled, ready or claimed) jobs, unless ' +
          '?force=true, which cancels them first. Finished jobs stay readable until their retention ends.',
        params: QueueParams,
        querystring: DeleteQueueQuery,
        response: { 200: ok(ref(DeletedQueue), 'Deleted.'), ...errorResponses(400, 404, 409) },
      },
    },
    async (request) => {
      const { queue } = request.params;
      const cancelled = await app.service.queues.delete(queue, request.query.force ?? false);
      return { name: queue, deleted: true as const, cancelled };
    },
  );

  app.post(
    '/v1/queues/:queue/purge',
    {
      config: { access: { scopes: ['admin'], queue: 'param' } },
      schema: {
        tags: ['queues'],
        operationId: 'purgeQueue',
        summary: 'Cancel every ready and scheduled job',
        description: 'Claimed jobs are left to their workers. Answers how many jobs were cancelled.',
        params: QueueParams,
        response: { 200: ok(ref(PurgeResponse), 'How many jobs were cancelled.'), ...errorResponses(404) },
      },
    },
    async (request) => {
      const { queue } = request.params;
      const cancelled = await app.service.queues.purge(queue);
      return { cancelled };
    },
  );

  app.post(
    '/v1/queues/:queue/redrive',
    {
      config: { access: { scopes: ['admin'], queue: 'param' } },
      schema: {
        tags: ['queues'],
        operationId: 'redriveQueue',
        summary: 'Send dead jobs back to ready',
        description:
          'With attempts reset (error history kept). All dead jobs ({"all": true}), a list of ids, or those dead ' +
          'since a time. Works in batches of 1,000, each its own transaction.',
        params: QueueParams,
        body: ref(RedriveRequest),
        response: {
          200: ok(ref(RedriveResponse), 'How many jobs went back to ready.'),
          ...errorResponses(400, 404, 413, 415),
        },
      },
    },
    async (request) => {
      const { queue } = request.params;
      const { ids, dead_since, all } = request.body;
      const deadSince = dead_since === undefined ? undefined : toUtcTimestamp(dead_since);
      const redriven = await app.service.queues.redrive(queue, { ids, deadSince, all });
      return { redriven };
    },
  );
};

export default queues;
