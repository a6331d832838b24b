import { ProblemSchema } from './problem.js';

const DESCRIPTIONS: Record<number, string> = {
  400: 'Invalid request: `detail` and `errors` name the field (validation_failed, malformed_json).',
  401: 'Missing or unknown API key (unauthorized).',
  403: 'The key lacks the scope or the queue (forbidden).',
  404: 'No such job or queue (not_found, queue_not_found).',
  409: 'Conflict: the lease is not yours any more (lease_lost), or the job is finished (invalid_state).',
  413: 'A payload or the body is over its size limit (payload_too_large).',
  503: 'The database is unreachable or the server is overloaded or shutting down (unavailable); retry after Retry-After.',
};

/** Problem responses a route can answer with, for its schema and the OpenAPI document. */
export function errorResponses(...statuses: number[]) {
  const out: Record<number, typeof ProblemSchema> = {};
  for (const status of [...statuses, 503]) {
    out[status] = {
      ...ProblemSchema,
      description: DESCRIPTIONS[status] ?? 'Problem details',
    } as typeof ProblemSchema;
  }
  return out;
}
