import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { isUnavailableError } from '../db/errors.js';
import {
  PROBLEM_CONTENT_TYPE,
  type Problem,
  type ProblemCode,
  ProblemError,
  problemBody,
} from '../http/problem.js';
import { fieldErrors } from '../http/validation.js';

/** Seconds a client should wait before retrying a 503. */
const RETRY_AFTER_SECONDS = 1;

function send(reply: FastifyReply, request: FastifyRequest, body: Problem, retryAfter?: number) {
  if (retryAfter !== undefined) reply.header('retry-after', String(retryAfter));
  return reply
    .code(body.status)
    .type(PROBLEM_CONTENT_TYPE)
    .send({ ...body, instance: request.url.split('?')[0], request_id: request.id });
}

/** Fastify's own client-error codes, mapped to ours. */
const FASTIFY_CODES: Record<string, ProblemCode> = {
  FST_ERR_CTP_INVALID_JSON_BODY: 'malformed_json',
  FST_ERR_CTP_EMPTY_JSON_BODY: 'malformed_json',
  FST_ERR_CTP_BODY_TOO_LARGE: 'payload_too_large',
  FST_ERR_CTP_INVALID_MEDIA_TYPE: 'unsupported_media_type',
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: 'validation_failed',
  FST_ERR_CTP_INVALID_TYPE: 'unsupported_media_type',
};

/**
 * The one error handler. Turns every error into problem+json: our ProblemErrors as they are,
 * schema validation errors into a 400 naming the field, database outages into 503 with
 * Retry-After, and anything else into a logged 500 (a 500 is always a bug).
 */
export default fp(
  async function problemHandler(app: FastifyInstance) {
    app.setErrorHandler((error: FastifyError, request, reply) => {
      if (error instanceof ProblemError) {
        return send(
          reply,
          request,
          problemBody(error.code, error.message, { errors: error.extra.errors }),
          error.extra.retryAfterSeconds,
        );
      }
      if (error.validation) {
        const errors = fieldErrors(error.validation as never, error.validationContext);
        const first = errors[0];
        const detail = first ? `${first.field} ${first.message}` : error.message;
        return send(reply, request, problemBody('validation_failed', detail, { errors }));
      }
      const mapped = error.code ? FASTIFY_CODES[error.code] : undefined;
      if (mapped) {
        const detail =
          mapped === 'malformed_json' ? `request body is not valid JSON: ${error.message}` : error.message;
        return send(reply, request, problemBody(mapped, detail));
      }
      if (isUnavailableError(error)) {
        request.log.warn({ err: error }, 'database unavailable');
        return send(
          reply,
          request,
          problemBody('unavailable', 'the database is unavailable; retry shortly'),
          RETRY_AFTER_SECONDS,
        );
      }
      if (error.statusCode && error.statusCode >= 400 && error.statusCode < 500) {
        // Any other client error Fastify raises (e.g. a bad header); keep its status.
        const body = problemBody('validation_failed', error.message);
        return send(reply, request, { ...body, status: error.statusCode });
      }
      request.log.error({ err: error }, 'unhandled error');
      return send(
        reply,
        request,
        problemBody('internal_error', 'an internal error occurred; it has been logged'),
      );
    });

    app.setNotFoundHandler((request, reply) =>
      send(
        reply,
        request,
        problemBody('not_found', `no route for ${request.method} ${request.url.split('?')[0]}`),
      ),
    );
  },
  { name: 'problem-handler', fastify: '5.x' },
);
