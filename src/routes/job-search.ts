import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { queuePatternsOf } from '../auth/api-keys.js';
import { invalidField } from '../errors.js';
import { decodeCursor, encodeCursor } from '../http/cursor.js';
import { failureListOf } from '../http/failure-list.js';
import { JobSearchPage, JobSearchQuery } from '../http/schemas/job-search.js';
import { ref } from '../http/schemas/ref.js';
import { errorResponses, ok } from '../http/schemas/responses.js';
import { toListedJob } from '../http/views.js';
import type { JobRow } from '../jobs/job-row.js';
import { BULK_MATCH_MAX } from '../jobs/limits.js';
import { parseFailureKey } from '../jobs/search.js';

/**
 * GET /v1/jobs: the operator's lists across queues (src/jobs/search.ts): failing or dead jobs, newest
 * failure first, filtered by queue, group, error text and time; or the job a unique or idempotency
 * key names. The dashboard's Failures page and its search read it.
 */
const jobSearch: FastifyPluginAsyncTypebox = async (app) => {
  app.get(
    '/v1/jobs',
    {
      config: { access: { scopes: ['producer', 'consumer'] } },
      schema: {
        tags: ['jobs'],
        operationId: 'searchJobs',
        summary: 'Find jobs across queues: what is failing, what died, what a key names',
        description:
          'With `state=failing` or `state=dead`: those jobs of every queue the key may see (or one `queue`), ' +
          'newest failure first, filtered by `group`, `error` (text in the last error) and `since`; keyset ' +
          'pages (pass next_cursor as cursor). With `unique_key` or `idempotency_key` instead of a state: the ' +
          'jobs that key names, in one page. With `count=true` (and a state), also how many jobs the whole ' +
          "list holds (up to 10,000) and the time of that count, to pass as a bulk action's `match.until`. " +
          'A key limited to some queues sees only theirs.',
        querystring: JobSearchQuery,
        response: { 200: ok(ref(JobSearchPage), 'A page of jobs.'), ...errorResponses(400) },
      },
    },
    async (request) => {
      const q = request.query;
      const patterns = queuePatternsOf(request.apiKey);
      const view = (row: JobRow) => toListedJob(row, q.include_payload);
      const key =
        q.unique_key !== undefined
          ? { unique_key: q.unique_key }
          : q.idempotency_key !== undefined
            ? { idempotency_key: q.idempotency_key }
            : undefined;
      if (key !== undefined) {
        if (q.unique_key !== undefined && q.idempotency_key !== undefined) {
          throw invalidField('idempotency_key', 'cannot be given with unique_key: search by one key');
        }
        for (const field of ['state', 'since', 'group', 'error', 'cursor'] as const) {
          if (q[field] !== undefined) throw invalidField(field, 'cannot be given with a key search');
        }
        if (q.count) throw invalidField('count', 'counts a list (state); a key search is one page');
        const rows = await app.service.jobs.findByKey(key, {
          ...(q.queue === undefined ? {} : { queue: q.queue }),
          ...(patterns === undefined ? {} : { patterns }),
        });
        return { jobs: rows.map(view), next_cursor: null };
      }
      if (q.state === undefined) {
        throw invalidField(
          'state',
          'is required (failing or dead) unless unique_key or idempotency_key is given',
        );
      }
      const list = failureListOf({ ...q, state: q.state }, patterns);
      const page = await app.service.jobs.failures({
        ...list,
        limit: q.limit ?? 25,
        ...(q.cursor === undefined ? {} : { after: parseFailureKey(decodeCursor(q.cursor)) }),
      });
      const jobs = { jobs: page.rows.map(view), next_cursor: page.next ? encodeCursor(page.next) : null };
      if (!q.count) return jobs;
      // The count's time bounds it, so that a bulk action given it as match.until acts on these jobs.
      const counted_at = new Date().toISOString();
      const total = await app.service.jobs.countFailures({ ...list, until: counted_at }, BULK_MATCH_MAX);
      return {
        ...jobs,
        total: Math.min(total, BULK_MATCH_MAX),
        total_capped: total > BULK_MATCH_MAX,
        counted_at,
      };
    },
  );
};

export default jobSearch;
