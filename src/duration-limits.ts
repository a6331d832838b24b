/**
 * Duration bounds that the API (claims, renewals, queue settings; jobs/limits.ts re-exports them)
 * and the server defaults of config/settings.ts must agree on, and the units they are written in.
 * A leaf: it imports nothing, so config reads it without reaching the domain.
 */
export const SECOND = 1000;
export const MINUTE = 60 * SECOND;
export const HOUR = 60 * MINUTE;
export const DAY = 24 * HOUR;
export const YEAR = 365 * DAY;

/** Lease lengths, for claims, renewals, queue settings and the server default. */
export const LEASE_MS_MIN = SECOND;
export const LEASE_MS_MAX = 12 * HOUR;

/** Retry backoff: the first delay, and the cap on any delay (queue settings and server defaults). */
export const BACKOFF_BASE_MS_MAX = DAY;
export const BACKOFF_MAX_MS_MAX = 30 * DAY;
/** How long finished jobs may be kept (queue settings and server defaults). */
export const RETENTION_MS_MAX = 10 * YEAR;
