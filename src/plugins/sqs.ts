import type { FastifyError, FastifyInstance } from 'fastify';
import type { ApiKey } from '../auth/api-keys.js';
import { serverSecret } from '../db/server-secrets.js';
import { ProblemError } from '../http/problem.js';
import { DeadLetterDuty } from '../maintenance/dead-letter.js';
import { ReceiveAttemptsDuty } from '../maintenance/receive-attempts.js';
import sqsRoutes from '../routes/sqs.js';
import { authenticator } from '../sqs/authenticate.js';
import type { SqsDeps } from '../sqs/call.js';
import type { SqsCredential } from '../sqs/credentials.js';
import { errorResponse, JSON_CONTENT_TYPE, protocolOf } from '../sqs/endpoint.js';
import { SqsError } from '../sqs/errors.js';
import { QueueCache } from '../sqs/queue-cache.js';
import { RECEIPT_HANDLE_SECRET, ReceiptHandles } from '../sqs/receipt-handle.js';

export interface SqsPluginOptions {
  /** The configured API keys: with none, requests are not checked (see sqs/authenticate.ts). */
  apiKeys: readonly ApiKey[];
  /** BATON_SQS_CREDENTIALS and BATON_SQS_CREDENTIALS_FILE, each pair naming one of `apiKeys`. */
  credentials: readonly SqsCredential[];
}

/**
 * The SQS-compatible endpoint (docs/sqs.md), in a context of its own: its bodies are read raw (the
 * signature covers their bytes) in the two content types SQS clients send, and every error, even
 * one raised before the handler (load shedding, a body too large, another content type), is answered
 * in SQS's shape, never as problem+json. The leader gets one more duty: forwarding dead messages to
 * their queue's dead-letter queue. Registered unless BATON_SQS=false.
 */
export default async function sqs(app: FastifyInstance, opts: SqsPluginOptions) {
  const { config } = app;
  app.removeAllContentTypeParsers();
  app.addContentTypeParser(
    [JSON_CONTENT_TYPE, 'application/x-www-form-urlencoded'],
    { parseAs: 'buffer' },
    (_request, body, done) => done(null, body),
  );

  app.setErrorHandler((error: FastifyError, request, reply) => {
    const response = errorResponse(protocolOf(request.headers), asSqsError(error, request.log), request.id);
    return reply.code(response.status).headers(response.headers).send(response.body);
  });

  const jobsReady = (queue: string, count: number) => app.wake.notifier.jobsReady(queue, count);
  // The handles' key, read on first use (and read again if that failed: the database was away).
  let handles: Promise<ReceiptHandles> | undefined;
  const receiptHandles = () => {
    handles ??= serverSecret(app.db, RECEIPT_HANDLE_SECRET).then(
      (key) => new ReceiptHandles(key),
      (err) => {
        handles = undefined;
        throw err;
      },
    );
    return handles;
  };
  const deps: SqsDeps = {
    config,
    place: { region: config.sqsRegion, accountId: config.sqsAccountId },
    queues: new QueueCache(app.service.queues, config),
    service: app.service,
    receiptHandles,
    metrics: app.metrics,
  };
  app.maintainer?.addDuty(new DeadLetterDuty(app.db, app.log, jobsReady, config.tickMs));
  app.maintainer?.addDuty(new ReceiveAttemptsDuty(app.db, config.tickMs));
  await app.register(sqsRoutes, { deps, authenticate: authenticator(opts.apiKeys, opts.credentials) });
}

/** An error raised around the handler, as the SQS error to answer. */
function asSqsError(error: FastifyError, log: FastifyInstance['log']): SqsError {
  if (error instanceof SqsError) return error;
  if (error instanceof ProblemError) {
    if (error.code === 'unavailable') return new SqsError('ServiceUnavailable', error.message);
    if (error.code === 'forbidden' || error.code === 'unauthorized')
      return new SqsError('AccessDenied', error.message);
    return new SqsError('InvalidParameterValue', error.message);
  }
  if (error.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE' || error.code === 'FST_ERR_CTP_INVALID_TYPE') {
    return new SqsError(
      'InvalidAction',
      `Send SQS requests as ${JSON_CONTENT_TYPE} with X-Amz-Target: AmazonSQS.<Action>, or as ` +
        'application/x-www-form-urlencoded with Action=<Action>.',
    );
  }
  if (error.code === 'FST_ERR_CTP_BODY_TOO_LARGE') {
    return new SqsError(
      'InvalidParameterValue',
      'The request body is larger than this server accepts (BATON_BODY_LIMIT_BYTES).',
    );
  }
  if (error.statusCode !== undefined && error.statusCode < 500) {
    return new SqsError('InvalidParameterValue', error.message);
  }
  log.error({ err: error }, 'unhandled error on the SQS endpoint');
  return new SqsError('InternalFailure', 'An internal error occurred; it has been logged.');
}
