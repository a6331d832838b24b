import type { IncomingHttpHeaders } from 'node:http';
import { faultFields, isDataException, isUnavailableError } from '../db/errors.js';
import { DomainError } from '../errors.js';
import { traceFromHeaders } from '../jobs/trace-context.js';
import { NestingError, parseJsonDocument } from '../json/nesting.js';
import type { Log } from '../logger.js';
import type { Caller } from './access.js';
import { checkScope } from './access.js';
import { actionNamed } from './actions/index.js';
import type { SqsCall, SqsDeps } from './call.js';
import { SqsError } from './errors.js';
import { asInput, type Input } from './input.js';
import { parseQueryBody } from './query.js';
import { xmlAnswer, xmlError } from './xml.js';

/**
 * One SQS request, protocol to protocol: find the protocol and the action, authenticate, read the
 * input, check the caller's scope, run the action, and answer in the protocol that asked, errors
 * included (JSON `{"__type", "message"}` with the `x-amzn-query-error` header the SDKs read, or the
 * query protocol's XML `<ErrorResponse>`). Nothing here speaks HTTP beyond headers and a body; the
 * route (src/routes/sqs.ts) does that.
 */
export type Protocol = 'json' | 'query';

export const JSON_CONTENT_TYPE = 'application/x-amz-json-1.0';
const TARGET_PREFIX = 'AmazonSQS.';

export interface SqsRequest {
  method: string;
  /** Path and query as they arrived. */
  url: string;
  headers: IncomingHttpHeaders;
  body: Buffer;
  baseUrl: string;
  pathQueueUrl: string | undefined;
  signal: AbortSignal;
  log: Log;
  requestId: string;
}

export interface SqsResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** Who is calling: verifies the signature (or, with authentication off, trusts the request). */
export type Authenticate = (request: SqsRequest) => Caller;

/** The JSON protocol names its action in X-Amz-Target; anything else is the query protocol. */
export function protocolOf(headers: IncomingHttpHeaders): Protocol {
  const type = String(headers['content-type'] ?? '').toLowerCase();
  return headers['x-amz-target'] !== undefined || type.startsWith('application/x-amz-json')
    ? 'json'
    : 'query';
}

export async function handleSqs(
  deps: SqsDeps,
  authenticate: Authenticate,
  request: SqsRequest,
): Promise<SqsResponse> {
  const protocol = protocolOf(request.headers);
  let action = 'Unknown';
  try {
    const caller = authenticate(request);
    const parsed = parse(protocol, request);
    action = parsed.action ?? 'Unknown';
    const run = actionNamed(parsed.action);
    checkScope(caller, action);
    const call: SqsCall = {
      deps,
      caller,
      baseUrl: request.baseUrl,
      pathQueueUrl: request.pathQueueUrl,
      signal: request.signal,
      log: request.log,
      trace: traceFromHeaders(request.headers),
    };
    const result = await run(call, parsed.input);
    return protocol === 'json'
      ? answer(200, JSON_CONTENT_TYPE, JSON.stringify(result), request.requestId)
      : answer(200, 'text/xml', xmlAnswer(action, result, request.requestId), request.requestId);
  } catch (err) {
    return errorResponse(protocol, toSqsError(err, request.log, action), request.requestId);
  }
}

function parse(protocol: Protocol, request: SqsRequest): { action: string | undefined; input: Input } {
  const text = request.body.toString('utf8');
  if (protocol === 'json') {
    const target = request.headers['x-amz-target'];
    const action =
      typeof target === 'string' && target.startsWith(TARGET_PREFIX)
        ? target.slice(TARGET_PREFIX.length)
        : undefined;
    if (action === undefined) actionNamed(undefined);
    let body: unknown;
    try {
      body = text.trim() === '' ? {} : parseJsonDocument(text);
    } catch (err) {
      // Too deep or not JSON: either way the body cannot be read, which SQS calls a serialization error.
      throw new SqsError(
        'SerializationException',
        err instanceof NestingError
          ? `The request body ${err.message}.`
          : `The request body is not valid JSON: ${(err as Error).message}`,
      );
    }
    return { action, input: asInput(body, 'the request body') };
  }
  // The query protocol's parameters come in the form body; older clients may put some in the URL.
  const query = request.url.includes('?') ? request.url.slice(request.url.indexOf('?') + 1) : '';
  return parseQueryBody(query === '' ? text : `${query}&${text}`);
}

function answer(status: number, contentType: string, body: string, requestId: string): SqsResponse {
  return { status, headers: { 'content-type': contentType, 'x-amzn-requestid': requestId }, body };
}

export function errorResponse(protocol: Protocol, err: SqsError, requestId: string): SqsResponse {
  if (protocol === 'query') {
    const response = answer(
      err.status,
      'text/xml',
      xmlError(err.fault, err.code, err.message, requestId),
      requestId,
    );
    if (err.status === 503) response.headers['retry-after'] = '1';
    return response;
  }
  const body = JSON.stringify({ __type: `com.amazonaws.sqs#${err.shape}`, message: err.message });
  const response = answer(err.status, JSON_CONTENT_TYPE, body, requestId);
  response.headers['x-amzn-query-error'] = `${err.code};${err.fault}`;
  if (err.status === 503) response.headers['retry-after'] = '1';
  return response;
}

/** Any error as the SQS error to answer; a bug is logged and answered InternalFailure (500). */
export function toSqsError(err: unknown, log: Log, action: string): SqsError {
  if (err instanceof SqsError) return err;
  if (err instanceof DomainError) {
    if (err.code === 'queue_not_found')
      return new SqsError('QueueDoesNotExist', 'The specified queue does not exist.');
    if (err.code === 'validation_failed') return new SqsError('InvalidParameterValue', err.message);
    if (err.code === 'queue_limit_reached') return new SqsError('OverLimit', err.message);
  }
  if (isUnavailableError(err)) {
    log.warn({ ...faultFields(err), action }, 'database unavailable');
    return new SqsError('ServiceUnavailable', 'The database is unavailable; retry shortly.');
  }
  if (isDataException(err)) {
    log.warn({ err, action }, 'the database refused a value that passed validation');
    return new SqsError('InvalidParameterValue', `A value was refused: ${(err as Error).message}`);
  }
  log.error({ err, action }, 'SQS action failed');
  return new SqsError('InternalFailure', 'An internal error occurred; it has been logged.');
}
