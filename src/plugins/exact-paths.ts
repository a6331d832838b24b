import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { ProblemError } from '../http/problem.js';

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * A write names its target exactly. The router ignores a trailing slash (GET /v1/queues/q/ reads
 * q), which is harmless for a read; but the trailing slash of a write is what a client leaves of a
 * "." or ".." segment it removed: the dashboard's "Reset group .." of queue q became
 * DELETE /v1/queues/q/ and deleted the queue. Such names can no longer be made (jobs/limits.ts,
 * DOT_SEGMENTS), and a POST, PUT, PATCH or DELETE of an API route whose path ends in "/" is refused
 * with 400 before it can reach another target. The SQS endpoint (POST /) is not an API route.
 */
export default fp(
  async function exactPaths(app: FastifyInstance) {
    app.addHook('onRequest', (request, _reply, done) => {
      if (SAFE_METHODS.has(request.method) || !request.routeOptions.url?.startsWith('/v1/')) {
        done();
        return;
      }
      const path = request.url.split('?', 1)[0]!;
      if (path.endsWith('/')) {
        throw new ProblemError(
          'bad_request',
          'the path ends in "/": a write must name its target exactly (a client may have removed a "." or ".." ' +
            'segment from it, which would point it at another target)',
        );
      }
      done();
    });
  },
  { name: 'exact-paths', fastify: '5.x' },
);
