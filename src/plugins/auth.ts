import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { type ApiKey, findKey, keyAllowsQueue, type Scope } from '../auth/api-keys.js';
import { apiKeysOf, type OpenEndpoint } from '../config.js';
import { ProblemError } from '../http/problem.js';
import { queuesOfJobs } from '../jobs/read.js';

/**
 * Who may call what. Each route declares its access in its options:
 *
 *   config: { access: { scopes: ['consumer'], queue: 'param' } }
 *
 * `scopes` lists the scopes that may call it (admin may call everything); `queue` says where the
 * queue comes from, for keys limited to queue patterns: the `:queue` path parameter, the job named
 * by `:id`, or every job of a batch ack or renew. Keys are presented as `Authorization: Bearer <key>`.
 *
 * With no keys configured, authentication is off (and config.ts only lets the server bind a
 * loopback address, unless BATON_ALLOW_UNAUTHENTICATED says otherwise).
 */

export interface Access {
  scopes: Scope[];
  /** Where the queue comes from: the `:queue` param, the `:id` job's queue, or a batch body's jobs. */
  queue?: 'param' | 'job' | 'batch';
}

declare module 'fastify' {
  interface FastifyContextConfig {
    access?: Access;
  }
  interface FastifyRequest {
    /** The API key the request authenticated with (undefined when authentication is off). */
    apiKey?: ApiKey;
  }
}

/** Endpoints outside /v1 that may be opened with BATON_OPEN_ENDPOINTS. */
function endpointOf(url: string): OpenEndpoint | 'healthz' | undefined {
  const path = url.split('?')[0]!;
  if (path === '/healthz') return 'healthz';
  if (path === '/readyz') return 'readyz';
  if (path === '/metrics') return 'metrics';
  if (path === '/openapi.json' || path === '/docs' || path.startsWith('/docs/')) return 'docs';
  return undefined;
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

export default fp(
  async function auth(app: FastifyInstance) {
    const keys = apiKeysOf(app.config);
    if (keys.length === 0) return;
    const open = new Set<string>(['healthz', ...app.config.openEndpoints]);

    app.addHook('onRequest', async (request: FastifyRequest, reply: FastifyReply) => {
      const endpoint = endpointOf(request.url);
      const access = request.routeOptions.config?.access;
      if (endpoint && open.has(endpoint)) return;
      if (!endpoint && !access) return; // an unknown route: the 404 handler answers
      const header = request.headers.authorization;
      if (!header)
        throw unauthorized(reply, 'an API key is required: send Authorization: Bearer <key>', false);
      const secret = BEARER.exec(header)?.[1];
      const key = secret === undefined ? undefined : findKey(keys, secret);
      if (!key) throw unauthorized(reply, 'the API key is not valid', true);
      request.apiKey = key;
      if (!access) return; // a protected operations endpoint: any valid key
      if (!key.scopes.has('admin') && !access.scopes.some((s) => key.scopes.has(s))) {
        throw forbidden(key, `lacks the scope for this (needs ${[...access.scopes, 'admin'].join(' or ')})`);
      }
      const queue = (request.params as { queue?: string }).queue;
      if (access.queue === 'param' && queue !== undefined && !keyAllowsQueue(key, queue)) {
        throw forbidden(key, `may not use queue "${queue}"`);
      }
    });

    // Keys limited to queue patterns, on routes that name jobs rather than a queue: look the
    // jobs' queues up once the body is parsed. (Unknown jobs are left to the route: 404.)
    app.addHook('preHandler', async (request) => {
      const key = request.apiKey;
      const access = request.routeOptions.config?.access;
      if (!key?.queues || !access || (access.queue !== 'job' && access.queue !== 'batch')) return;
      const body = request.body as { acks?: { id: string }[]; renewals?: { id: string }[] };
      const ids =
        access.queue === 'job'
          ? [(request.params as { id: string }).id]
          : (body.acks ?? body.renewals ?? []).map((item) => item.id);
      const valid = ids.filter((id) => /^[0-9]{1,18}$/.test(id));
      for (const [id, queue] of await queuesOfJobs(app.db, valid)) {
        if (!keyAllowsQueue(key, queue)) throw forbidden(key, `may not use job ${id} (queue "${queue}")`);
      }
    });
  },
  { name: 'auth', fastify: '5.x', dependencies: ['database'] },
);
