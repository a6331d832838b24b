import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { logFieldsOf } from '../db/errors.js';
import { BUILD_SCHEMA, schemaReadiness } from '../db/readiness.js';
import { PROBLEM_CONTENT_TYPE, problemBody } from '../http/problem.js';
import { Health, Readiness } from '../http/schemas/health.js';
import { ref } from '../http/schemas/ref.js';
import { ok, problemResponse } from '../http/schemas/responses.js';
import { BATON_VERSION } from '../version.js';

const READY_CHECK_TIMEOUT_MS = 2000;

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

const health: FastifyPluginAsyncTypebox = async (app) => {
  app.get(
    '/healthz',
    {
      config: { access: { endpoint: 'healthz' } },
      schema: {
        tags: ['health'],
        operationId: 'getHealth',
        security: [],
        summary: 'Liveness: the process is up',
        description:
          'Answers 200 while the process runs, with its release and the schema it runs. It does not touch the database.',
        response: {
          200: ok(ref(Health), 'The process is up.'),
          503: problemResponse(503),
        },
      },
    },
    async () => ({ status: 'ok' as const, version: BATON_VERSION, schema: BUILD_SCHEMA }),
  );

  app.get(
    '/readyz',
    {
      config: { access: { endpoint: 'readyz' } },
      schema: {
        tags: ['health'],
        operationId: 'getReadiness',
        security: [{}, { apiKey: [] }],
        summary: 'Readiness: the database answers and its schema is current',
        description:
          'Answers 200 when the database is reachable and every migration this build knows is applied; ' +
          '503 problem+json otherwise, and while the server is shutting down.',
        response: {
          200: ok(ref(Readiness), 'Ready to serve.'),
          503: problemResponse(503),
        },
      },
    },
    async (request, reply) => {
      const unready = (detail: string) =>
        reply
          .code(503)
          .type(PROBLEM_CONTENT_TYPE)
          .header('retry-after', '1')
          .send({ ...problemBody('unavailable', detail), instance: '/readyz', request_id: request.id });
      if (app.shuttingDown) return unready('the server is shutting down');
      try {
        const { pending, database } = await withTimeout(schemaReadiness(app.db), READY_CHECK_TIMEOUT_MS);
        if (pending.length > 0) return unready(`migrations not applied: ${pending.join(', ')}`);
        return {
          status: 'ready' as const,
          version: BATON_VERSION,
          schema: BUILD_SCHEMA,
          database_schema: database,
        };
      } catch (err) {
        request.log.warn(logFieldsOf(err), 'readiness check failed');
        return unready(`the database is unreachable: ${(err as Error).message}`);
      }
    },
  );
};

export default health;
