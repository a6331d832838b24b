/**
 * Errors the domain modules (jobs/, queues/) throw when a request cannot be done as asked. They
 * know nothing of HTTP: the one error handler (plugins/problem-handler.ts) answers each with the
 * problem+json of the same `code`.
 */
export type DomainErrorCode =
  | 'not_found'
  | 'forbidden'
  | 'queue_not_found'
  | 'queue_limit_reached'
  | 'schedule_limit_reached'
  | 'queue_not_empty'
  | 'lease_lost'
  | 'deadline_exceeded'
  | 'invalid_state'
  | 'too_many_waiters'
  | 'move_running'
  | 'move_finished'
  | 'validation_failed';

export class DomainError extends Error {
  constructor(
    readonly code: DomainErrorCode,
    message: string,
    /** For validation_failed: each field at fault, with what is wrong with it. */
    readonly errors?: { field: string; message: string }[],
    /** When the client may try again (answered as Retry-After). */
    readonly retryAfterSeconds?: number,
  ) {
    super(message);
    this.name = 'DomainError';
  }
}

export const queueNotFound = (queue: string, reason = '') =>
  new DomainError('queue_not_found', `queue "${queue}" does not exist${reason}`);

export const jobNotFound = (id: string) => new DomainError('not_found', `job ${id} does not exist`);

export const leaseLost = (id: string) =>
  new DomainError(
    'lease_lost',
    `job ${id} is not claimed under this lease_token (the lease expired and was re-armed, the job was ` +
      'acked, nacked or cancelled, or the token is wrong)',
  );

export const deadlineExceeded = (id: string) =>
  new DomainError(
    'deadline_exceeded',
    `job ${id}'s attempt has passed its deadline (timeout_ms): its lease cannot be renewed; the attempt fails`,
  );

/** A value that breaks a rule the schema cannot express (one field against another, say). */
export const invalidField = (field: string, message: string) =>
  new DomainError('validation_failed', `${field} ${message}`, [{ field, message }]);

/**
 * A request that would await jobs past a cap of waiters (wake/await-slots.ts). Waiters end within
 * their wait (at most a minute) and most sooner: a second is a fair first retry.
 */
export const tooManyWaiters = (reason: string) =>
  new DomainError('too_many_waiters', `too many requests awaiting jobs: ${reason}`, undefined, 1);
