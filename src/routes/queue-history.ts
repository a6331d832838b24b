import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { QueueParams } from '../http/schemas/jobs.js';
import { QueueHistory, QueueHistoryQuery } from '../http/schemas/queues.js';
import { ref } from '../http/schemas/ref.js';
import { errorResponses, ok } from '../http/schemas/responses.js';
import { toQueueSample } from '../http/views.js';

/** GET /v1/queues/{queue}/history: the per-minute samples the leader keeps, for charts. */
const queueHistory: FastifyPluginAsyncTypebox = async (app) => {
  app.get(
    '/v1/queues/:queue/history',
    {
      config: { access: { scopes: ['producer', 'consumer'], queue: 'param' } },
      schema: {
        tags: ['queues'],
        operationId: 'getQueueHistory',
        summary: 'A queue, minute by minute: counts, arrivals, completions, failures, lag',
        description:
          'Samples the maintenance leader takes once a minute and keeps for a day: live counts and queue lag ' +
          'at each sample, and the jobs that arrived, completed, died or were cancelled since the previous one. ' +
          'Reading it never counts jobs.',
        params: QueueParams,
        querystring: QueueHistoryQuery,
        response: { 200: ok(ref(QueueHistory), 'The samples, oldest first.'), ...errorResponses(404) },
      },
    },
    async (request) => {
      const { queue } = request.params;
      const minutes = request.query.minutes ?? 60;
      const history = await app.service.queues.history(queue, minutes);
      return {
        queue,
        now: history.now.toISOString(),
        samples: history.samples.map(toQueueSample),
      };
    },
  );
};

export default queueHistory;
