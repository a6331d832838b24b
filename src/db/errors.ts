/**
 * Classifies errors from node-postgres. "Unavailable" errors are outages or overload (the database
 * is down, restarting, out of connections, or a statement timed out): the request may be retried
 * and the answer is 503, never 500.
 */

const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'ENOTFOUND',
  'EHOSTUNREACH',
  'EAI_AGAIN',
]);

const UNAVAILABLE_SQLSTATES = new Set([
  '57P01', // admin_shutdown (pg_terminate_backend, or the server stopping)
  '57P02', // crash_shutdown
  '57P03', // cannot_connect_now (starting up or shutting down)
  '57014', // query_canceled (statement_timeout)
  '40001', // serialization_failure
  '40P01', // deadlock_detected
  '55P03', // lock_not_available (a lock_timeout expired)
  '25P03', // idle_in_transaction_session_timeout
  '25006', // read_only_sql_transaction: a write reached a standby (a failover under way)
]);

export function sqlState(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
}

export function isUnavailableError(err: unknown): boolean {
  const code = sqlState(err);
  if (code && (NETWORK_CODES.has(code) || UNAVAILABLE_SQLSTATES.has(code))) return true;
  // Class 08: connection exception; class 53: insufficient resources (too many connections, disk full).
  if (code && /^(08|53)[0-9A-Z]{3}$/.test(code)) return true;
  if (isLostConnection(err)) return true;
  const message = (err as Error | null)?.message ?? '';
  return (
    message.includes('timeout exceeded when trying to connect') ||
    // "Connection terminated due to connection timeout", among others
    message.includes('connection timeout') ||
    message.includes('Query read timeout')
  );
}

/**
 * A statement that failed because its connection went away: the backend was terminated
 * (pg_terminate_backend, a server restart or crash: 57P01, 57P02, class 08) or the socket closed
 * under it. The statement did not commit, or its answer was lost on the way; nothing else about the
 * database is wrong, and another connection from the pool works.
 *
 * Not a statement timeout, a lock timeout, a deadlock or too many connections: those say the
 * database is busy, and running the statement again at once would add to it.
 */
export function isLostConnection(err: unknown): boolean {
  const code = sqlState(err);
  if (code === '57P01' || code === '57P02' || code === 'ECONNRESET' || code === 'EPIPE') return true;
  if (code && /^08[0-9A-Z]{3}$/.test(code)) return true;
  const message = (err as Error | null)?.message ?? '';
  return (
    // Not "Connection terminated due to connection timeout": the pool could not connect in time.
    (message.includes('Connection terminated') && !message.includes('timeout')) ||
    message.includes('Client has encountered a connection error') ||
    message.includes('Client was closed')
  );
}

/** An expected fault (an outage, an overload), as one log line: its code and message, no stack. */
export function faultFields(err: unknown): { code?: string; error: string } {
  return { code: sqlState(err), error: (err as Error | null)?.message ?? String(err) };
}

/**
 * What a log line says of an error: an expected fault (isUnavailableError) in one line, anything
 * else, a bug, with its stack (pino's `err`).
 */
export function logFieldsOf(err: unknown): { code?: string; error: string } | { err: unknown } {
  return isUnavailableError(err) ? faultFields(err) : { err };
}

export const isLockTimeout = (err: unknown) => sqlState(err) === '55P03';
export const isUniqueViolation = (err: unknown) => sqlState(err) === '23505';

/**
 * Class 22 (data exception): PostgreSQL refused a value (bad uuid or timestamp text, out of range,
 * unpaired surrogate in JSON, ...). Request validation is meant to refuse every such value first, so
 * one reaching the database is a validation gap: it is answered 400, never 500.
 */
export const isDataException = (err: unknown) => /^22[0-9A-Z]{3}$/.test(sqlState(err) ?? '');

/**
 * A statement failed on what one of its inputs held (a data exception, or an integrity constraint:
 * class 23). When several requests share one statement (group commit), such a failure is one
 * member's doing, so the members are re-run one by one and only that member fails.
 */
export const isInputError = (err: unknown) => /^2[23][0-9A-Z]{3}$/.test(sqlState(err) ?? '');

/**
 * 40001 raised because a row this statement wanted to lock was moved to another partition by a
 * concurrent update (the leader carrying a long-running job to the current slot of the ring). Not
 * a serialization failure of ours: running the statement again finds the row where it is now.
 */
export const isMovedRowError = (err: unknown) =>
  sqlState(err) === '40001' && /moved to another partition/.test((err as Error).message ?? '');
