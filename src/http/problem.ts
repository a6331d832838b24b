/**
 * RFC 9457 problem details. Every error Baton answers with is one of these, with a stable machine
 * `code`; clients branch on `code`, people read `detail`.
 */

export const PROBLEM_CONTENT_TYPE = 'application/problem+json';

export const PROBLEM_CODES = {
  validation_failed: { status: 400, title: 'Request validation failed' },
  malformed_json: { status: 400, title: 'Request body is not valid JSON' },
  bad_request: { status: 400, title: 'Bad request' },
  unauthorized: { status: 401, title: 'Authentication required' },
  forbidden: { status: 403, title: 'Not allowed' },
  not_found: { status: 404, title: 'Not found' },
  queue_not_found: { status: 404, title: 'Queue not found' },
  method_not_allowed: { status: 405, title: 'Method not allowed' },
  request_timeout: { status: 408, title: 'Request not received in time' },
  lease_lost: { status: 409, title: 'Lease lost' },
  deadline_exceeded: { status: 409, title: 'Deadline exceeded' },
  invalid_state: { status: 409, title: 'Job is not in a state that allows this' },
  queue_not_empty: { status: 409, title: 'Queue has live jobs' },
  queue_limit_reached: { status: 409, title: 'Too many queues' },
  schedule_limit_reached: { status: 409, title: 'Too many schedules' },
  move_running: { status: 409, title: 'A move of this queue is running' },
  move_finished: { status: 409, title: 'The move has finished' },
  payload_too_large: { status: 413, title: 'Payload too large' },
  uri_too_long: { status: 414, title: 'URI too long' },
  unsupported_media_type: { status: 415, title: 'Unsupported media type' },
  too_many_waiters: { status: 429, title: 'Too many requests awaiting jobs' },
  internal_error: { status: 500, title: 'Internal error' },
  unavailable: { status: 503, title: 'Service unavailable' },
} as const;

export type ProblemCode = keyof typeof PROBLEM_CODES;

export interface FieldError {
  field: string;
  message: string;
}

export interface Problem {
  type: string;
  title: string;
  status: number;
  code: ProblemCode;
  detail: string;
  instance?: string;
  request_id?: string;
  errors?: FieldError[];
}

export class ProblemError extends Error {
  readonly status: number;
  constructor(
    readonly code: ProblemCode,
    detail: string,
    readonly extra: { errors?: FieldError[]; retryAfterSeconds?: number } = {},
  ) {
    super(detail);
    this.name = 'ProblemError';
    this.status = PROBLEM_CODES[code].status;
  }
}

export function problemBody(code: ProblemCode, detail: string, extra: Partial<Problem> = {}): Problem {
  return {
    type: `urn:baton:problem:${code}`,
    title: PROBLEM_CODES[code].title,
    status: PROBLEM_CODES[code].status,
    code,
    detail,
    ...extra,
  };
}
