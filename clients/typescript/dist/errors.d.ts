import type { FieldError, ProblemCode } from './types.js';
/**
 * Codes of a BatonError: Baton's own (problem+json `code`), or, with status 0, what went wrong
 * before an answer came: `connection_failed` (refused, reset, DNS), `timeout` (no answer within
 * the request's time), `await_timeout` (an awaited job had not finished within timeoutMs).
 * `http_error` is an error answer that was not Baton's problem+json (a proxy's page, say).
 */
export type BatonErrorCode = ProblemCode | 'connection_failed' | 'timeout' | 'await_timeout' | 'http_error';
export interface BatonErrorFields {
    status: number;
    code: BatonErrorCode;
    detail: string;
    title?: string;
    type?: string;
    errors?: FieldError[];
    requestId?: string;
    retryAfterMs?: number;
}
/**
 * Every failure of a Client call, and of the worker's requests: Baton's problem details (status,
 * code, detail, field errors), or status 0 when no answer came (see BatonErrorCode).
 */
export declare class BatonError extends Error {
    readonly name = "BatonError";
    /** The HTTP status; 0 when no answer came. */
    readonly status: number;
    /** Stable machine-readable code: branch on this. */
    readonly code: BatonErrorCode;
    /** What went wrong, naming the field or resource. */
    readonly detail: string;
    readonly title: string | undefined;
    readonly type: string | undefined;
    /** For validation_failed: each invalid field, e.g. jobs[3].priority. */
    readonly errors: FieldError[];
    /** The request id Baton logged the request under, when it gave one. */
    readonly requestId: string | undefined;
    /** From a Retry-After header (429, 503). */
    readonly retryAfterMs: number | undefined;
    constructor(fields: BatonErrorFields, options?: {
        cause?: unknown;
    });
}
/**
 * Thrown by a handler: fail this attempt and retry the job after `delayMs` (instead of the queue's
 * backoff). Counts as an attempt like any failure. (Any error with a numeric `retryInMs` does the same.)
 */
export declare class RetryLater extends Error {
    readonly name: string;
    readonly delayMs: number | undefined;
    constructor(message?: string, options?: {
        delayMs?: number;
        cause?: unknown;
    });
}
/** Thrown by a handler: fail the job for good, whatever attempts it has left (nack dead: true). */
export declare class PermanentFailure extends Error {
    readonly name: string;
}
