import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { queuePatternsOf } from '../auth/api-keys.js';
import { invalidField } from '../errors.js';
import { failureListOf } from '../http/failure-list.js';
import { BulkRequest, BulkResponse } from '../http/schemas/job-search.js';
import { ref } from '../http/schemas/ref.js';
import { errorResponses, ok } from '../http/schemas/responses.js';
import type { BulkResult } from '../service/bulk.js';

/**
 * POST /v1/jobs/bulk: one action on jobs an operator picked by id, or on every job of a failure list
 * (`match`), a result per job (service/bulk.ts).
 */
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
          'Up to 1,000 ids, each named once; or `match`: every job of a GET /v1/jobs list (dead or failing, ' +
          'with its filters) that failed at or before `until`, up to 10,000 (`more` says whether others ' +
          'are left). Each job gets its own outcome: the action done, not_found, or ' +
          'invalid_state with the state it is in (a live job is not deleted, a finished one not cancelled, ' +
          'only a dead one is redriven). 200 whatever the outcomes; `done` and `failed` count them. Jobs of ' +
          'queues a limited key may not use are not_found.',
        body: ref(BulkRequest),
        response: {
          200: ok(ref(BulkResponse), 'A result per job, in request order (or the list order).'),
          ...errorResponses(400),
        },
      },
    },
    async (request) => {
      const { action, ids, match } = request.body;
      const patterns = queuePatternsOf(request.apiKey);
      if (ids !== undefined && match !== undefined) throw invalidField('match', 'cannot be given with ids');
      let answer: { results: BulkResult[]; more: boolean };
      if (ids !== undefined)
        answer = { results: await app.service.bulk.run(action, ids, patterns), more: false };
      else if (match !== undefined) {
        answer = await app.service.bulk.runMatch(action, failureListOf(match, patterns));
      } else throw invalidField('ids', 'is required: the jobs to act on (or match, a list of them)');
      const done = answer.results.filter(
        (r) => r.outcome !== 'not_found' && r.outcome !== 'invalid_state',
      ).length;
      return { ...answer, done, failed: answer.results.length - done };
    },
  );
};

export default bulk;
