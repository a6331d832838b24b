import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import type { SqsDeps } from '../sqs/call.js';
import { type Authenticate, handleSqs } from '../sqs/endpoint.js';

/**
 * The SQS endpoint's routes: `POST /` (where the SDKs and the AWS CLI send every action, with
 * `--endpoint-url`/`endpoint` set to Baton's base URL) and `POST /{account}/{queue}` (the queue URL
 * itself, where some older clients post queue actions). HTTP only: src/sqs/endpoint.ts does the
 * rest. Hidden from the OpenAPI document, which describes Baton's own API; docs/sqs.md describes
 * this one. Registered by src/plugins/sqs.ts, which gives them their body parsers and error handler.
 */
export interface SqsRouteOptions {
  deps: SqsDeps;
  authenticate: Authenticate;
}

/** A Host header fit to put in a URL; anything else gives loopback (the URL then names the server). */
const HOST = /^[A-Za-z0-9.-]+(:\d{1,5})?$|^\[[0-9A-Fa-f:.]+\](:\d{1,5})?$/;

const sqsRoutes: FastifyPluginAsync<SqsRouteOptions> = async (app, { deps, authenticate }) => {
  const handler = async (request: FastifyRequest, reply: FastifyReply) => {
    const { account, queue } = request.params as { account?: string; queue?: string };
    const baseUrl =
      app.config.sqsQueueUrl ??
      `${request.protocol}://${HOST.test(request.host) ? request.host : '127.0.0.1'}`;
    // The response's 'close' fires when it finishes or when the client drops the connection; only
    // the latter (nothing written yet) should stop a long-poll.
    const abort = new AbortController();
    const onClose = () => {
      if (!reply.raw.writableEnded) abort.abort();
    };
    reply.raw.once('close', onClose);
    try {
      const response = await handleSqs(deps, authenticate, {
        method: request.method,
        url: request.raw.url ?? '/',
        headers: request.headers,
        body: Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0),
        baseUrl,
        pathQueueUrl:
          account !== undefined && queue !== undefined ? `${baseUrl}/${account}/${queue}` : undefined,
        signal: abort.signal,
        log: request.log,
        requestId: request.id,
      });
      return reply.code(response.status).headers(response.headers).send(response.body);
    } finally {
      reply.raw.off('close', onClose);
    }
  };
  const options = { schema: { hide: true }, config: { access: { own: 'sigv4' as const } } };
  app.post('/', options, handler);
  app.post('/:account(^\\d{12}$)/:queue', options, handler);
};

export default sqsRoutes;
