import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { faultFields, isDataException, isUnavailableError } from '../db/errors.js';
import { DomainError } from '../errors.js';
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
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: 'bad_request',
  FST_ERR_CTP_INVALID_TYPE: 'unsupported_media_type',
  FST_ERR_BAD_URL: 'bad_request',
  FST_ERR_MAX_PARAM_LENGTH: 'uri_too_long',
};

/** Any other client error (a plugin's, or Node's), by status. */
const STATUS_PROBLEMS: Record<number, ProblemCode> = {
  403: 'forbidden',
  404: 'not_found',
  405: 'method_not_allowed',
  408: 'request_timeout',
  413: 'payload_too_large',
  414: 'uri_too_long',
  415: 'unsupported_media_type',
};

const DETAILS: Partial<Record<ProblemCode, string>> = {
  unsupported_media_type: 'send the body as JSON with the header Content-Type: application/json',
  uri_too_long: 'a path segment is longer than any queue name or job id can be',
  request_timeout: 'the request was not received in time (BATON_REQUEST_TIMEOUT_MS)',
};

/** The problem for an error a client caused that is not one of ours: Fastify's, a plugin's. */
function clientProblem(error: { code?: string; statusCode?: number; message: string }): Problem {
  const status = error.statusCode ?? 400;
  const code: ProblemCode =
    (error.code ? FASTIFY_CODES[error.code] : undefined) ?? STATUS_PROBLEMS[status] ?? 'bad_request';
  if (code === 'malformed_json') return problemBody(code, `request body is not valid JSON: ${error.message}`);
  const body = problemBody(code, DETAILS[code] ?? error.message);
  return { ...body, status: code === 'bad_request' ? status : body.status };
}

/**
 * Fastify's `frameworkErrors` option: a URL that cannot be decoded (`/v1/queues/a%zz`) or a path
 * segment over the router's limit is answered before any route runs; answer it as problem+json too.
 */
export function frameworkErrors(error: FastifyError, request: FastifyRequest, reply: FastifyReply) {
  return send(reply, request, clientProblem(error));
}

/**
 * Fastify's `clientErrorHandler` option: errors Node's HTTP parser raises before there is a request
 * (a body not received within the request timeout, headers too large, a malformed request line).
 * The connection is closed after the answer.
 */
export function clientErrorHandler(error: Error & { code?: string }, socket: Socket): void {
  if (error.code === 'ECONNRESET' || socket.destroyed) return;
  const status =
    error.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 408 : error.code === 'HPE_HEADER_OVERFLOW' ? 431 : 400;
  const problem =
    status === 431
      ? { ...problemBody('bad_request', 'the request headers are too large'), status }
      : clientProblem({ statusCode: status, message: 'the request could not be parsed' });
  const body = JSON.stringify(problem);
  if (socket.writable) {
    socket.write(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nConnection: close\r\n` +
        `Content-Type: ${PROBLEM_CONTENT_TYPE}\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    );
  }
  socket.destroy();
}

/**
 * A route's path as a pattern over request paths (params match one segment, or their own regular
 * expression when they have one, as `:account(^\\d{12}$)`; trailing slash optional).
 */
function pathPattern(url: string): RegExp {
  const parts = url.split('/').map((part) => {
    const own = /^:\w+\(\^?(.+?)\$?\)$/.exec(part);
    if (own) return `(?:${own[1]})`;
    if (part.startsWith(':')) return '[^/]+';
    if (part === '*') return '.*';
    return part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  });
  return new RegExp(`^${parts.join('/')}/?$`);
}

/**
 * The one error handler. Turns every error into problem+json: our ProblemErrors and domain errors
 * as they are, schema validation errors into a 400 naming the field, a value PostgreSQL refused into
 * a 400, database outages into 503 with Retry-After, and anything else into a logged 500 (a 500 is
 * always a bug). A path that exists under another method is 405 with Allow.
 */
export default fp(
  async function problemHandler(app: FastifyInstance) {
    const routes: { pattern: RegExp; methods: string[] }[] = [];
    app.addHook('onRoute', (route) => {
      const methods = [route.method].flat();
      routes.push({ pattern: pathPattern(route.url), methods });
    });

    app.setErrorHandler((error: FastifyError, request, reply) => {
      if (error instanceof ProblemError) {
        return send(
          reply,
          request,
          problemBody(error.code, error.message, { errors: error.extra.errors }),
          error.extra.retryAfterSeconds,
        );
      }
      if (error instanceof DomainError) {
        return send(
          reply,
          request,
          problemBody(error.code, error.message, { errors: error.errors }),
          error.retryAfterSeconds,
        );
      }
      if (error.validation) {
        const errors = fieldErrors(error.validation as never, error.validationContext);
        const first = errors[0];
        const detail = first ? `${first.field} ${first.message}` : error.message;
        return send(reply, request, problemBody('validation_failed', detail, { errors }));
      }
      if (isUnavailableError(error)) {
        request.log.warn(faultFields(error), 'database unavailable');
        return send(
          reply,
          request,
          problemBody('unavailable', 'the database is unavailable; retry shortly'),
          RETRY_AFTER_SECONDS,
        );
      }
      if (isDataException(error)) {
        // Validation should have refused this value; say so in the log, and answer the client 400.
        request.log.warn({ err: error }, 'the database refused a value that passed validation');
        return send(
          reply,
          request,
          problemBody('validation_failed', `a value was refused: ${error.message}`),
        );
      }
      if ((error.code && FASTIFY_CODES[error.code]) || (error.statusCode && error.statusCode < 500)) {
        return send(reply, request, clientProblem(error));
      }
      request.log.error({ err: error }, 'unhandled error');
      return send(
        reply,
        request,
        problemBody('internal_error', 'an internal error occurred; it has been logged'),
      );
    });

    app.setNotFoundHandler((request, reply) => {
      const path = request.url.split('?')[0]!;
      const allowed = new Set(routes.filter((r) => r.pattern.test(path)).flatMap((r) => r.methods));
      if (allowed.size > 0) {
        reply.header('allow', [...allowed].sort().join(', '));
        return send(
          reply,
          request,
          problemBody(
            'method_not_allowed',
            `${request.method} is not allowed on ${path}; use ${[...allowed].sort().join(' or ')}`,
          ),
        );
      }
      return send(reply, request, problemBody('not_found', `no route for ${request.method} ${path}`));
    });
  },
  { name: 'problem-handler', fastify: '5.x' },
);
