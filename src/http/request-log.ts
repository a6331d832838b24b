import { type FastifyReply, type FastifyRequest, LogController } from 'fastify';
import { isProbe } from './probes.js';

/**
 * Per-request log lines. Fastify's default is two info lines per request ("incoming request",
 * "request completed"), about nine lines per job for a worker that claims, renews and acks: at
 * the default level that buries everything else, and /metrics already counts requests and their
 * durations. So: one line per request, after it completes (method, url, status, duration), at
 * debug. Failures are still logged where they are handled (5xx at error, outages at warn).
 */
const ms = (reply: FastifyReply) => Math.round(reply.elapsedTime * 10) / 10;

class OneLinePerRequest extends LogController {
  override incomingRequest(): void {}

  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply) {
    if (this.isLogDisabled(request)) return;
    if (error) {
      reply.log.error({ req: request, res: reply, err: error, responseTime: ms(reply) }, 'request errored');
    } else {
      reply.log.debug({ req: request, res: reply, responseTime: ms(reply) }, 'request completed');
    }
  }

  override routeNotFound(request: FastifyRequest) {
    if (this.isLogDisabled(request)) return;
    request.log.debug(`Route ${request.raw.method}:${request.raw.url} not found`);
  }
}

export function requestLogController(): LogController {
  return new OneLinePerRequest({
    requestIdLogLabel: 'request_id',
    disableRequestLogging: (request) => isProbe(request as FastifyRequest),
  });
}
