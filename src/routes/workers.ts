import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { queuePatternsOf } from '../auth/api-keys.js';
import { ref } from '../http/schemas/ref.js';
import { errorResponses, ok } from '../http/schemas/responses.js';
import { LeaseHolderList, LeaseHolderQuery } from '../http/schemas/workers.js';
import { toLeaseHolder } from '../http/views.js';

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
        summary: 'Who holds leases now',
        description:
          "One row per worker (its claims' `worker_id`) and queue: the jobs it holds under a lease, when the " +
          'oldest was claimed, when one of its leases was last renewed, and when the first runs out. Read ' +
          'from the jobs in flight, nothing recorded per worker: a worker that holds nothing is not listed. ' +
          'A key limited to some queues sees only those.',
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
      return { workers: holders.map(toLeaseHolder), as_of: asOf.toISOString() };
    },
  );
};

export default workers;
