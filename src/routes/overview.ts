import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { queuePatternsOf } from '../auth/api-keys.js';
import { Overview } from '../http/schemas/overview.js';
import { ref } from '../http/schemas/ref.js';
import { errorResponses, ok } from '../http/schemas/responses.js';
import { toOverview } from '../http/views.js';

/**
 * GET /v1/overview: is the system healthy, at a glance. The dashboard's first page reads it; it
 * counts no jobs (the leader's counts and per-minute samples, summed), so it answers as fast with a
 * thousand queues and a hundred thousand dead jobs as with one.
 */
const overview: FastifyPluginAsyncTypebox = async (app) => {
  app.get(
    '/v1/overview',
    {
      config: { access: { scopes: ['producer', 'consumer'] } },
      schema: {
        tags: ['operations'],
        operationId: 'getOverview',
        summary: 'Every queue at a glance: totals, the last hour, queues needing attention',
        description:
          'Totals of every queue the key may see as the maintenance leader last counted them (with when), ' +
          'the last hour minute by minute (jobs enqueued, completed and failed), and up to 10 queues needing ' +
          'attention first. A key limited to some queues sees only those.',
        response: { 200: ok(ref(Overview), 'The overview.'), ...errorResponses() },
      },
    },
    async (request) => toOverview(await app.service.queues.overview(queuePatternsOf(request.apiKey))),
  );
};

export default overview;
