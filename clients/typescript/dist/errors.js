/**
 * Every failure of a Client call, and of the worker's requests: Baton's problem details (status,
 * code, detail, field errors), or status 0 when no answer came (see BatonErrorCode).
 */
export class BatonError extends Error {
    name = 'BatonError';
    /** The HTTP status; 0 when no answer came. */
    status;
    /** Stable machine-readable code: branch on this. */
    code;
    /** What went wrong, naming the field or resource. */
    detail;
    title;
    type;
    /** For validation_failed: each invalid field, e.g. jobs[3].priority. */
    errors;
    /** The request id Baton logged the request under, when it gave one. */
    requestId;
    /** From a Retry-After header (429, 503). */
    retryAfterMs;
    constructor(fields, options) {
        super(`${fields.status ? `${fields.status} ` : ''}${fields.code}: ${fields.detail}`, options);
        this.status = fields.status;
        this.code = fields.code;
        this.detail = fields.detail;
        this.title = fields.title;
        this.type = fields.type;
        this.errors = fields.errors ?? [];
        this.requestId = fields.requestId;
        this.retryAfterMs = fields.retryAfterMs;
    }
}
/**
 * Thrown by a handler: fail this attempt and retry the job after `delayMs` (instead of the queue's
 * backoff). Counts as an attempt like any failure. (Any error with a numeric `retryInMs` does the same.)
 */
export class RetryLater extends Error {
    name = 'RetryLater';
    delayMs;
    constructor(message = 'retry later', options = {}) {
        super(message, options.cause === undefined ? undefined : { cause: options.cause });
        this.delayMs = options.delayMs;
    }
}
/** Thrown by a handler: fail the job for good, whatever attempts it has left (nack dead: true). */
export class PermanentFailure extends Error {
    name = 'PermanentFailure';
}
