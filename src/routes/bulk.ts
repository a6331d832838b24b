import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { queuePatternsOf } from '../auth/api-keys.js';
import { BulkRequest, BulkResponse } from '../http/schemas/job-search.js';
import { ref } from '../http/schemas/ref.js';
import { errorResponses, ok } from '../http/schemas/responses.js';

/** POST /v1/jobs/bulk: one action on jobs an operator picked, a result per job (service/bulk.ts). */
const bulk: FastifyPluginAsyncTypebox = async (app) => {
  app.post(
    '/v1/jobs/bulk',
    {
      config: { access: { scopes: ['admin'] } },
      schema: {
        tags: ['jobs'],
        operationId: 'bulkJobs',
        summary: 'Redrive, cancel or delete many jobs, with a result per job',
        description:
          'Up to 1,000 ids, each named once. Each job gets its own outcome: the action done, not_found, or ' +
          'invalid_state with the state it is in (a live job is not deleted, a finished one not cancelled, ' +
          'only a dead one is redriven). 200 whatever the outcomes; `done` and `failed` count them. Jobs of ' +
          'queues a limited key may not use are not_found.',
        body: ref(BulkRequest),
        response: {
          200: ok(ref(BulkResponse), 'A result per job, in request order.'),
          ...errorResponses(400),
        },
      },
    },
    async (request) => {
      const { action, ids } = request.body;
      const results = await app.service.bulk.run(action, ids, queuePatternsOf(request.apiKey));
      const done = results.filter((r) => r.outcome !== 'not_found' && r.outcome !== 'invalid_state').length;
      return { results, done, failed: results.length - done };
    },
  );
};

export default bulk;
