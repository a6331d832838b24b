import { type BatonClient, type components, createBatonClient, type paths } from '../../openapi/client.js';

/**
 * The page's only way to the server: the typed client generated from openapi/openapi.json, so the
 * dashboard uses exactly the public API (and shows how to use it). Every call carries the key.
 */

export type Queue = components['schemas']['Queue'];
export type Job = components['schemas']['Job'];
export type QueueSample = components['schemas']['QueueSample'];
export type Problem = components['schemas']['Problem'];
export type Group = components['schemas']['Group'];
export type RateLimit = components['schemas']['RateLimit'];
export type Schedule = components['schemas']['Schedule'];
export type QueueHistory =
  paths['/v1/queues/{queue}/history']['get']['responses'][200]['content']['application/json'];
export type Whoami = paths['/v1/whoami']['get']['responses'][200]['content']['application/json'];
export type JobState = Job['state'];
export type { BatonClient };

/** A refused call. Its message is the problem's detail: user data, always shown as text. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly problem?: Problem,
  ) {
    super(problem?.detail ?? `the server answered ${status}`);
  }
}

/** A client that sends `key` with every call and reports a 401 (the key stopped working). */
export function createApi(key: string | undefined, onUnauthorized: () => void): BatonClient {
  const client = createBatonClient({
    baseUrl: location.origin,
    headers: key === undefined ? {} : { authorization: `Bearer ${key}` },
  });
  client.use({
    onResponse({ response }) {
      if (response.status === 401) onUnauthorized();
    },
  });
  return client;
}

/** The data of a call's answer, or an ApiError with the problem it answered. */
export async function must<R extends { data?: unknown; error?: unknown; response: Response }>(
  call: Promise<R>,
): Promise<NonNullable<R['data']>> {
  const { data, error, response } = await call;
  if (error !== undefined || data === undefined || data === null) {
    throw new ApiError(response.status, error as Problem | undefined);
  }
  return data as NonNullable<R['data']>;
}

/**
 * The server's clock when it answered (its Date header, to the second), so that ages such as "counted
 * 3 s ago" do not depend on the viewer's clock being right.
 */
export const serverClock = (response: Response): number =>
  Date.parse(response.headers.get('date') ?? '') || Date.now();
