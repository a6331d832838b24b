/**
 * Limits of the public API, in one place: request schemas, validation messages and docs read them.
 * (Lease bounds live in config.ts because the default lease is a setting validated against them.)
 */
export const QUEUE_NAME_PATTERN = '^[A-Za-z0-9._-]{1,128}$';
export const QUEUE_NAME_MAX = 128;
/** Jobs per batch enqueue, claim or batch ack. */
export const MAX_BATCH = 1000;
export const MAX_WAIT_MS = 20_000;
/** Longest delay or retry a job may be given: ten years. */
export const MAX_DELAY_MS = 10 * 365 * 24 * 3600 * 1000;
export const PRIORITY_MIN = -2_147_483_648;
export const PRIORITY_MAX = 2_147_483_647;
export const MAX_ATTEMPTS_LIMIT = 1000;
export const IDEMPOTENCY_KEY_MAX = 255;
export const WORKER_ID_MAX = 128;
export const ERROR_MESSAGE_MAX = 4096;
/** Failed attempts kept in a job's error history (older ones are dropped). */
export const ERRORS_KEPT = 20;
/** Printable text: no control characters (PostgreSQL text cannot hold NUL at all). */
export const PRINTABLE_PATTERN = '^[^\\u0000-\\u001f\\u007f]*$';
