import createClient, { type ClientOptions } from 'openapi-fetch';
import type { components, paths } from './schema.js';

/**
 * A typed Baton client, generated from openapi/openapi.json (openapi-typescript + openapi-fetch).
 * Every path, body and answer is typed; errors come back as `error` (problem details), never thrown.
 *
 *   const baton = createBatonClient({ baseUrl: 'http://127.0.0.1:8080' });
 *   const { data, error } = await baton.POST('/v1/queues/{queue}/claim', {
 *     params: { path: { queue: 'emails' } }, body: { max_jobs: 10, wait_ms: 20000 } });
 */
export function createBatonClient(options: ClientOptions) {
  return createClient<paths>(options);
}

export type BatonClient = ReturnType<typeof createBatonClient>;
export type Job = components['schemas']['Job'];
export type ClaimedJob = components['schemas']['ClaimedJob'];
export type Problem = components['schemas']['Problem'];
export type { components, paths };
