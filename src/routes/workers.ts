import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { keyAllowsQueue, queuePatternsOf } from '../auth/api-keys.js';
import { ProblemError } from '../http/problem.js';
import { ref } from '../http/schemas/ref.js';
import { errorResponses, ok } from '../http/schemas/responses.js';
import {
  LeaseHolderList,
  LeaseHolderQuery,
  WorkerAnnounced,
  WorkerAnnouncement,
  WorkerForgotten,
  WorkerParams,
} from '../http/schemas/workers.js';
import { toAnnouncedWorker, toLeaseHolder } from '../http/views.js';

/**
 * GET /v1/workers: who holds leases now (worker, queue, jobs held, oldest claim, last renewal, next
 * expiry), read from the claimed jobs; the dashboard's Workers page.
 */
const workers: FastifyPluginAsyncTypebox = async (app) => {
  app.get(
    '/v1/workers',
    {
      config: { access: { scopes: ['producer', 'consumer'] } },
      schema: {
        tags: ['operations'],
        operationId: 'listWorkers',
        summary: 'The workers: who holds leases now, and who announced itself',
        description:
          "`workers`: one row per worker (its claims' `worker_id`) and queue: the jobs it holds under a lease, " +
          'when the oldest was claimed, when one of its leases was last renewed, and when the first runs out, ' +
          'read from the jobs in flight. `announced`: the workers that announced themselves (PUT ' +
          '/v1/workers/{id}), idle or busy, with host, pid, concurrency and the jobs they hold. With `queue`, ' +
          'both only for that queue. A key limited to some queues sees only those.',
        querystring: LeaseHolderQuery,
        response: { 200: ok(ref(LeaseHolderList), 'The workers holding leases.'), ...errorResponses(400) },
      },
    },
    async (request) => {
      const { holders, asOf } = await app.service.leases.holders({
        ...(request.query.queue === undefined ? {} : { queue: request.query.queue }),
        limit: request.query.limit ?? 100,
        patterns: queuePatternsOf(request.apiKey),
      });
      const announced = await app.service.workers.list({
        ...(request.query.queue === undefined ? {} : { queue: request.query.queue }),
        patterns: queuePatternsOf(request.apiKey),
        limit: 500,
      });
      return {
        workers: holders.map(toLeaseHolder),
        announced: announced.map(toAnnouncedWorker),
        as_of: asOf.toISOString(),
      };
    },
  );

  app.put(
    '/v1/workers/:id',
    {
      config: { access: { scopes: ['consumer'] } },
      schema: {
        tags: ['operations'],
        operationId: 'announceWorker',
        summary: 'A worker announces itself (and again, as a heartbeat)',
        description:
          'Its host, pid, concurrency, version and queues, listed by GET /v1/workers (and the Workers page) idle or ' +
          'busy while it announces or claims, and no longer after BATON_WORKER_SILENCE_MS without either. A claim ' +
          'with this worker_id on one of its queues counts as a sign of life. The key must be allowed each queue.',
        params: WorkerParams,
        body: ref(WorkerAnnouncement),
        response: { 200: ok(ref(WorkerAnnounced), 'Announced.'), ...errorResponses(400, 403, 413, 415) },
      },
    },
    async (request) => {
      const key = request.apiKey;
      const { queues, host, pid, concurrency, version } = request.body;
      for (const queue of queues) {
        if (key && !keyAllowsQueue(key, queue)) {
          throw new ProblemError('forbidden', `API key "${key.name}" may not use queue "${queue}"`);
        }
      }
      await app.service.workers.announce({
        owner: key?.name ?? '',
        id: request.params.id,
        queues,
        host: host ?? null,
        pid: pid ?? null,
        concurrency: concurrency ?? null,
        version: version ?? null,
      });
      return { announced: true as const, silence_ms: app.config.workerSilenceMs };
    },
  );

  app.delete(
    '/v1/workers/:id',
    {
      config: { access: { scopes: ['consumer'] } },
      schema: {
        tags: ['operations'],
        operationId: 'forgetWorker',
        summary: 'A worker that stops says so',
        description:
          'It is no longer listed (until it announces itself again). 404 if this key never announced it.',
        params: WorkerParams,
        response: { 200: ok(ref(WorkerForgotten), 'Forgotten.'), ...errorResponses(404) },
      },
    },
    async (request) => {
      const forgotten = await app.service.workers.forget(request.apiKey?.name ?? '', request.params.id);
      if (!forgotten)
        throw new ProblemError('not_found', `no worker ${request.params.id} announced with this key`);
      return { forgotten: true as const };
    },
  );
};

export default workers;
