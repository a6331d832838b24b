import type { FastifyInstance, FastifyReply, FastifyRequest, RouteOptions } from 'fastify';
import fp from 'fastify-plugin';
import { type ApiKey, findKey, keyAllowsQueue, type Scope } from '../auth/api-keys.js';
import type { OpenEndpoint } from '../config.js';
import { jobNotFound } from '../errors.js';
import { crossSiteWrite } from '../http/cross-site.js';
import { ProblemError } from '../http/problem.js';
import { queuesOfJobs } from '../jobs/read.js';
import { scheduleNotFound } from '../schedules/manage.js';
import { queueOfSchedule } from '../schedules/store.js';

/**
 * Who may call what. Every route declares its access in its options, and a route without one is
 * refused at start-up (and, were one to slip through, answered 403): access is decided on the route
 * that matched, never on the raw URL, so `/metrics/`, `/%6detrics` and an absolute-form request
 * target are the same route with the same rule.
 *
 *   config: { access: { scopes: ['consumer'], queue: 'param' } }   an API route
 *   config: { access: { endpoint: 'metrics' } }                     an operations endpoint
 *
 * `scopes` lists the scopes that may call an API route (admin may call everything); `queue` says
 * where the queue comes from, for keys limited to queue patterns: the `:queue` path parameter, the
 * job named by `:id`, every job of a batch ack or renew, or the schedule named by `:name` (and, for
 * its PUT, the body's queue too). To such a key a job or schedule of another queue is
 * indistinguishable from one that does not exist (404, or `not_found` for a batch item), and one
 * whose queue cannot be found is treated the same way (fail closed). Only a PUT over a schedule
 * name that another queue's schedule holds is refused with 403 (schedule names are one namespace). Operations endpoints are open
 * when listed in BATON_OPEN_ENDPOINTS (`healthz` always is); otherwise they need a key, and
 * `/metrics`, which reports every queue, a key not limited to queue patterns. The dashboard's files
 * (`ui`) are always open: they hold no data, and a browser cannot send a key with a page load; the
 * page asks for a key and sends it with every API call.
 *
 * Whatever the keys, a request that changes something is refused when the browser says it comes
 * from a page of another site (Sec-Fetch-Site, or an Origin other than this server): see
 * http/cross-site.ts.
 *
 * Keys are presented as `Authorization: Bearer <key>`. With no keys configured, authentication is
 * off (and start-up, in startup-inputs.ts, only lets the server bind a loopback address, unless
 * BATON_ALLOW_UNAUTHENTICATED says otherwise).
 */

export type Access =
  | { scopes: Scope[]; queue?: 'param' | 'job' | 'batch' | 'schedule' }
  | { endpoint: OpenEndpoint | 'healthz' | 'ui' }
  /**
   * The route authenticates each request itself, because its credentials cover the raw body: the
   * SQS endpoint verifies AWS Signature Version 4 against configured key pairs that map to API
   * keys, and applies their scopes and queue patterns per action (src/sqs/, docs/sqs.md).
   */
  | { own: 'sigv4' };

declare module 'fastify' {
  interface FastifyContextConfig {
    access?: Access;
  }
  interface FastifyRequest {
    /** The API key the request authenticated with (undefined when authentication is off). */
    apiKey?: ApiKey;
    /**
     * For a key limited to queue patterns, on a route that names jobs: the queue of each named job
     * that the key may use. A batch item absent from it (a job of another queue, or none at all) is
     * answered `not_found` and left out of the write; the write itself is scoped to the queue found
     * here (jobs/lease-outcome.ts's ScopedId), so the statement cannot touch a job of another queue
     * whatever this check saw. Undefined when the key may use every queue.
     */
    jobQueues?: ReadonlyMap<string, string>;
  }
}

function unauthorized(reply: FastifyReply, detail: string, invalid: boolean): ProblemError {
  reply.header(
    'www-authenticate',
    invalid ? 'Bearer realm="baton", error="invalid_token"' : 'Bearer realm="baton"',
  );
  return new ProblemError('unauthorized', detail);
}

function forbidden(key: ApiKey, what: string): ProblemError {
  return new ProblemError('forbidden', `API key "${key.name}" ${what}`);
}

const BEARER = /^Bearer\s+(\S+)\s*$/i;

/** The jobs a batch route names, for the queue check. */
function batchIds(request: FastifyRequest): string[] {
  const body = request.body as { acks?: { id: string }[]; renewals?: { id: string }[]; ids?: string[] };
  return body.ids ?? (body.acks ?? body.renewals ?? []).map((item) => item.id);
}

export interface AuthPluginOptions {
  /** BATON_API_KEYS and BATON_API_KEYS_FILE, read at start-up (startup-inputs.ts). None: no keys needed. */
  apiKeys: readonly ApiKey[];
}

export default fp<AuthPluginOptions>(
  async function auth(app: FastifyInstance, opts) {
    // Every route must say who may call it; checked once all routes are registered.
    const routes: RouteOptions[] = [];
    app.addHook('onRoute', (route) => {
      routes.push(route);
    });
    app.addHook('onReady', async () => {
      const bare = routes.filter((r) => !r.config?.access);
      if (bare.length > 0) {
        const names = bare.map((r) => `${[r.method].flat().join(',')} ${r.url}`).join('; ');
        throw new Error(`routes without an access declaration (config.access): ${names}`);
      }
    });

    // Callback-style hooks (a throw is the hook's error, as with async ones): an async hook costs a
    // promise and a microtask turn on every request.
    app.addHook('onRequest', (request, _reply, done) => {
      const why = crossSiteWrite(request);
      if (why)
        throw new ProblemError('forbidden', `a page of another site may not change anything here (${why})`);
      done();
    });

    const keys = opts.apiKeys;
    if (keys.length === 0) return;
    const open = new Set<string>(['healthz', 'ui', ...app.config.openEndpoints]);

    const authenticate = (request: FastifyRequest, reply: FastifyReply): ApiKey => {
      const header = request.headers.authorization;
      if (!header)
        throw unauthorized(reply, 'an API key is required: send Authorization: Bearer <key>', false);
      const secret = BEARER.exec(header)?.[1];
      const key = secret === undefined ? undefined : findKey(keys, secret);
      if (!key) throw unauthorized(reply, 'the API key is not valid', true);
      request.apiKey = key;
      return key;
    };

    app.addHook('onRequest', (request: FastifyRequest, reply: FastifyReply, done: () => void) => {
      checkAccess(request, reply);
      done();
    });

    const checkAccess = (request: FastifyRequest, reply: FastifyReply): void => {
      // No route matched: the not-found handler answers 404 or 405, which reveals nothing.
      if (request.is404) return;
      const access = request.routeOptions.config?.access;
      if (!access) throw new ProblemError('forbidden', 'this route declares no access rule');
      if ('own' in access) return;
      if ('endpoint' in access) {
        if (open.has(access.endpoint)) return;
        const key = authenticate(request, reply);
        if (access.endpoint === 'metrics' && key.queues) {
          throw forbidden(key, 'is limited to some queues, and /metrics reports every queue');
        }
        return;
      }
      const key = authenticate(request, reply);
      if (!key.scopes.has('admin') && !access.scopes.some((s) => key.scopes.has(s))) {
        const needs = [...new Set([...access.scopes, 'admin'])].join(' or ');
        throw forbidden(key, `lacks the scope for this (needs ${needs})`);
      }
      const queue = (request.params as { queue?: string }).queue;
      if (access.queue === 'param' && queue !== undefined && !keyAllowsQueue(key, queue)) {
        throw forbidden(key, `may not use queue "${queue}"`);
      }
    };

    // Keys limited to queue patterns, on routes that name jobs rather than a queue: look the jobs'
    // queues up once the body is parsed and validated (ids are canonical by then).
    // Only a key limited to queue patterns has anything to look up: every other request passes
    // without the promise an async hook would cost it.
    app.addHook('preHandler', (request, _reply, done) => {
      const key = request.apiKey;
      const access = request.routeOptions.config?.access;
      if (!key?.queues || !access || !('scopes' in access)) {
        done();
        return;
      }
      checkJobQueues(request, key, access).then(() => done(), done);
    });

    const checkJobQueues = async (
      request: FastifyRequest,
      key: ApiKey,
      access: Extract<Access, { scopes: Scope[] }>,
    ): Promise<void> => {
      if (access.queue === 'job') {
        const id = (request.params as { id: string }).id;
        const queue = (await queuesOfJobs(app.db, [id])).get(id);
        if (queue === undefined || !keyAllowsQueue(key, queue)) throw jobNotFound(id);
        request.jobQueues = new Map([[id, queue]]);
      } else if (access.queue === 'schedule') {
        const name = (request.params as { name: string }).name;
        const queue = await queueOfSchedule(app.db, name);
        if (request.method === 'PUT') {
          const target = (request.body as { queue: string }).queue;
          if (!keyAllowsQueue(key, target)) throw forbidden(key, `may not use queue "${target}"`);
          if (queue !== undefined && !keyAllowsQueue(key, queue)) {
            throw forbidden(
              key,
              `may not change schedule "${name}": it enqueues into a queue this key may not use`,
            );
          }
        } else if (queue === undefined || !keyAllowsQueue(key, queue)) {
          throw scheduleNotFound(name);
        }
      } else if (access.queue === 'batch') {
        const queues = await queuesOfJobs(app.db, batchIds(request));
        for (const [id, queue] of queues) if (!keyAllowsQueue(key, queue)) queues.delete(id);
        request.jobQueues = queues;
      }
    };
  },
  { name: 'auth', fastify: '5.x', dependencies: ['database'] },
);
