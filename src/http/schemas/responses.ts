import { ProblemSchema } from './problem.js';
import { ref } from './ref.js';

const DESCRIPTIONS: Record<number, string> = {
  400: 'Invalid request: `detail` and `errors` name the field (validation_failed, malformed_json).',
  401: 'Missing or unknown API key (unauthorized).',
  403: 'The key lacks the scope or the queue (forbidden).',
  404: 'No such job or queue (not_found, queue_not_found).',
  408: 'The request was not received within the request timeout (request_timeout).',
  409: 'Conflict: the lease is not yours any more (lease_lost), the job is finished (invalid_state), the queue has live jobs (queue_not_empty), or there are too many queues or schedules (queue_limit_reached, schedule_limit_reached), or a move of the queue is running or has ended (move_running, move_finished).',
  413: 'A payload or the body is over its size limit (payload_too_large).',
  414: 'A path segment is longer than any queue name or job id can be (uri_too_long).',
  415: 'The body is not application/json (unsupported_media_type).',
  429: 'Too many requests awaiting jobs, for this API key or this replica (too_many_waiters); retry after Retry-After.',
  503: 'The database is unreachable, or the server is overloaded or shutting down (unavailable); retry after Retry-After.',
};

/** A success response with its description (shown in the OpenAPI document). */
export function ok<T extends object>(schema: T, description: string): T {
  return { ...schema, description };
}

/** A problem+json response, for a route's schema and the OpenAPI document. */
export function problemResponse(status: number) {
  return {
    description: DESCRIPTIONS[status] ?? 'Problem details',
    content: { 'application/problem+json': { schema: ref(ProblemSchema) } },
  };
}

/** The problem responses a route can answer with (503 always: any route can meet an outage). */
export function errorResponses(...statuses: number[]) {
  const out: Record<number, ReturnType<typeof problemResponse>> = {};
  for (const status of [...statuses, 503]) out[status] = problemResponse(status);
  return out;
}
