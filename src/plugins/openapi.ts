import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { COMPONENTS } from '../http/schemas/components.js';
import { problemResponse } from '../http/schemas/responses.js';
import { BATON_VERSION } from '../version.js';
import type { Access } from './auth.js';

const DESCRIPTION = `Baton is a job queue over plain HTTP with PostgreSQL as its only state.

Producers enqueue JSON jobs; workers claim them under a lease, renew the lease while they work, and
ack or nack when done. Every claim mints a fresh \`lease_token\`; renew, ack and nack succeed only
with the job's current token (otherwise 409 \`lease_lost\`). Delivery is at-least-once.

Durations are integers in milliseconds named \`*_ms\`; timestamps are RFC 3339 UTC; ids are strings.
Every error is RFC 9457 \`application/problem+json\` with a stable \`code\`.`;

declare module 'fastify' {
  interface FastifyContextConfig {
    /**
     * Answers as the document states them, where they differ from the route's serialiser schema: a
     * route that also sends JSON text of another shape (a batch enqueue's `Prefer: return=minimal`).
     */
    documentedResponses?: Record<string, unknown>;
  }
}

type RouteSchema = {
  description?: string;
  params?: unknown;
  querystring?: unknown;
  body?: unknown;
  response?: Record<string, unknown>;
};

/**
 * Every answer a route can give is declared in the document, including those that come from the
 * HTTP layer rather than the handler: validation (400) of whatever the route takes, a path segment
 * over the router's limit (414), a body that is too slow (408), too large (413) or not JSON (415),
 * and 401/403 wherever a key may be needed. /v1 routes also say which scopes they need.
 */
function withDeclaredAnswers(schema: RouteSchema, access: Access): RouteSchema {
  const statuses: number[] = [];
  if (schema.params) statuses.push(400, 414);
  if (schema.querystring) statuses.push(400);
  if (schema.body) statuses.push(400, 408, 413, 415);
  let { description } = schema;
  let security: Record<string, string[]>[] | undefined;
  if ('scopes' in access) {
    const scopes = access.scopes.includes('admin') ? ['admin'] : [...access.scopes, 'admin'];
    const limits = access.queue ? ' A key limited to queue patterns must allow the queue.' : '';
    description = `${description ?? ''}\n\nAPI key scopes: ${scopes.join(' or ')}.${limits}`.trim();
    security = [{ apiKey: [] }];
    statuses.push(401, 403);
  } else if ('endpoint' in access && access.endpoint !== 'healthz') {
    // Open by default; a key is needed when BATON_OPEN_ENDPOINTS leaves the endpoint out.
    statuses.push(401);
    if (access.endpoint === 'metrics') statuses.push(403);
  }
  const response = { ...schema.response };
  for (const status of statuses) response[status] ??= problemResponse(status);
  return { ...schema, description, ...(security ? { security } : {}), response };
}

/**
 * The OpenAPI 3.1 document, generated from the routes' TypeBox schemas: GET /openapi.json, and an
 * interactive page at GET /docs. `npm run openapi` writes it to openapi/openapi.json (a test fails
 * when that file and the served document differ).
 */
export default fp(
  async function openapi(app: FastifyInstance) {
    for (const schema of COMPONENTS) app.addSchema(schema);
    // The interactive page's routes come from @fastify/swagger-ui; they follow the `docs` rule.
    app.addHook('onRoute', (route) => {
      if (route.url === '/docs' || route.url.startsWith('/docs/')) {
        route.config = { ...route.config, access: { endpoint: 'docs' } };
      }
    });
    await app.register(swagger, {
      openapi: {
        openapi: '3.1.0',
        info: {
          title: 'Baton',
          version: BATON_VERSION,
          description: DESCRIPTION,
          license: { name: 'MIT', identifier: 'MIT' },
        },
        // Generated clients take their default base URL from here; point yours at your deployment.
        servers: [{ url: 'http://127.0.0.1:8080', description: 'A server started with npm start' }],
        components: {
          securitySchemes: {
            apiKey: {
              type: 'http',
              scheme: 'bearer',
              description:
                'An API key: Authorization: Bearer <key>. Required when the server has keys configured ' +
                '(see docs/security.md); with none, the server only listens on loopback.',
            },
          },
        },
        tags: [
          { name: 'jobs', description: 'Enqueue, claim, read and cancel jobs.' },
          { name: 'leases', description: 'What the holder of a lease does: renew, ack, nack.' },
          { name: 'queues', description: 'Configure and operate queues.' },
          {
            name: 'groups',
            description: "A queue's groups (flow control): counts, limits, weights, pausing one group.",
          },
          {
            name: 'schedules',
            description: 'Cron schedules: recurring jobs the leader enqueues exactly once per occurrence.',
          },
          { name: 'push', description: 'Push queues: Baton POSTs their jobs to an endpoint (docs/push.md).' },
          { name: 'health', description: 'Liveness and readiness probes.' },
          { name: 'operations', description: 'Metrics, the API document, and the key in use.' },
        ],
      },
      transform: ({ schema, url, route }) => {
        const config = route.config as
          | { access?: Access; documentedResponses?: Record<string, unknown> }
          | undefined;
        const access = config?.access;
        if (!schema || !access) return { schema, url };
        const routeSchema = schema as RouteSchema;
        const documented = config?.documentedResponses
          ? { ...routeSchema, response: { ...routeSchema.response, ...config.documentedResponses } }
          : routeSchema;
        return { url, schema: withDeclaredAnswers(documented, access) };
      },
      refResolver: {
        // Components are named by their $id (Job, Queue, Problem, ...).
        buildLocalReference: (json, _baseUri, _fragment, i) => String(json.$id ?? `def-${i}`),
      },
    });
    await app.register(swaggerUi, {
      routePrefix: '/docs',
      uiConfig: { docExpansion: 'list', deepLinking: true },
      theme: { title: 'Baton API' },
      // The page's "Try it out" calls the server that served the page, whatever its address or port
      // (a relative server URL; /openapi.json keeps the default a generated client starts from).
      transformSpecification: (doc) => ({
        ...doc,
        servers: [{ url: '/', description: 'This server (the one serving this page)' }],
      }),
    });
    // Someone who opens the server's address in a browser lands on the dashboard, or without it on
    // the API page.
    const home = app.config.ui ? 'ui' : 'docs';
    app.get('/', { schema: { hide: true }, config: { access: { endpoint: home } } }, (_request, reply) =>
      reply.redirect(`/${home}`, 302),
    );
    app.get('/openapi.json', { schema: { hide: true }, config: { access: { endpoint: 'docs' } } }, async () =>
      app.swagger(),
    );
  },
  { name: 'openapi', fastify: '5.x' },
);
