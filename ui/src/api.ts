import { type BatonClient, type components, createBatonClient, type paths } from '../../openapi/client.js';

/**
 * The page's only way to the server: the typed client generated from openapi/openapi.json, so the
 * dashboard uses exactly the public API (and shows how to use it). Every call carries the key.
 */

export type Queue = components['schemas']['Queue'];
export type Job = components['schemas']['Job'];
export type RelatedJob = components['schemas']['RelatedJob'];
export type JobGraph = components['schemas']['JobGraph'];
export type QueueSample = components['schemas']['QueueSample'];
export type Problem = components['schemas']['Problem'];
export type Group = components['schemas']['Group'];
export type RateLimit = components['schemas']['RateLimit'];
export type Schedule = components['schemas']['Schedule'];
export type LeaseHolder = components['schemas']['LeaseHolder'];
export type AnnouncedWorker = components['schemas']['AnnouncedWorker'];
export type BulkMatch = components['schemas']['BulkMatch'];
export type Overview = components['schemas']['Overview'];
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

/**
 * A call the page would not send: the browser would change its path, so it would reach another
 * target than the one the page shows (see createApi).
 */
export class UnreachablePath extends Error {}

/**
 * A client that sends `key` with every call and reports a 401 (the key stopped working).
 *
 * Every call's path is checked against the one the page means before it is sent: the browser removes
 * a "." or ".." path segment (also written %2e%2e) from any URL, so a call about group ".." of queue
 * q would go to /v1/queues/q, read the queue as if it were the group, and "Reset group" would delete
 * the queue. The server no longer lets such names be made, but rows made before may have them; the
 * page then shows an error and never sends the call.
 */
export function createApi(key: string | undefined, onUnauthorized: () => void): BatonClient {
  const client = createBatonClient({
    baseUrl: location.origin,
    headers: key === undefined ? {} : { authorization: `Bearer ${key}` },
  });
  client.use({
    onRequest({ request, schemaPath, params }) {
      const path = params.path as Record<string, unknown> | undefined;
      // As openapi-fetch writes the path: each parameter percent-encoded in place of its {name}.
      const meant = schemaPath.replace(/\{(\w+)\}/g, (_, name: string) =>
        encodeURIComponent(String(path?.[name])),
      );
      if (new URL(request.url).pathname !== meant) {
        const names = Object.values(path ?? {}).map((v) => `"${String(v)}"`);
        throw new UnreachablePath(
          `${names.join(', ')} cannot be named in a URL (browsers remove "." and ".." path segments), so the ` +
            'dashboard will not send this request: it would reach another target. Use the API with the path ' +
            'sent as it is (curl --path-as-is).',
        );
      }
      return undefined;
    },
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
