import { isUnavailableError } from './db/errors.js';

/**
 * One line for a start-up failure that a person fixes by changing the environment (a port that is
 * taken, a database that does not answer), instead of a stack trace. Anything else returns
 * undefined: that is a bug, and its stack is what we want to see.
 */

function codeOf(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
}

function messageOf(err: unknown): string {
  return (err as Error | null)?.message ?? String(err);
}

export function listenProblem(err: unknown, host: string, port: number): string | undefined {
  switch (codeOf(err)) {
    case 'EADDRINUSE':
      return `port ${port} is in use; set PORT`;
    case 'EACCES':
      return `no permission to listen on port ${port}; set PORT (1024 or above)`;
    case 'EADDRNOTAVAIL':
      return `HOST=${host} is not an address of this machine; set HOST`;
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return `HOST=${host} does not resolve to an address; set HOST`;
    default:
      return undefined;
  }
}

/** The URL without its password, which must not reach a terminal or a log. */
export function redactUrl(url: string): string {
  // user:password@ before the host list (one host or several: the URL parser takes only one).
  const redacted = url.replace(/^(postgres(?:ql)?:\/\/[^:/?#@]*):[^/?#@]*@/, '$1:***@');
  try {
    new URL(redacted.replace(/@[^/?#]*/, '@host'));
    return redacted;
  } catch {
    return '(unparseable URL)';
  }
}

export function databaseProblem(err: unknown, url: string, connectTimeoutMs: number): string | undefined {
  const where = `the database at ${redactUrl(url)}`;
  const message = messageOf(err);
  switch (codeOf(err)) {
    case 'ECONNREFUSED':
      return `${where} refused the connection (is PostgreSQL running there?); check DATABASE_URL`;
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return `${where}: its host name does not resolve; check DATABASE_URL`;
    case 'ETIMEDOUT':
    case 'EHOSTUNREACH':
      return `${where} did not answer (${codeOf(err)}); check DATABASE_URL`;
    case '28P01':
    case '28000':
      return `${where} refused the login (${message}); check DATABASE_URL`;
    case '3D000':
      return `${where}: ${message}; create it or fix DATABASE_URL`;
  }
  // PgBouncer refuses startup parameters it does not know (database.ts sends the session's settings).
  if (/unsupported startup parameter/i.test(message)) {
    return (
      `${where} is a connection pooler that refuses settings sent at connect (${message}); ` +
      'set BATON_DB_POOLER=transaction (or session, for its pool mode) and see docs/configuration.md'
    );
  }
  // node-postgres reports a connect timeout as a terminated connection.
  if (/Connection terminated|trying to connect|connection timeout/i.test(message)) {
    return (
      `${where} closed the connection or did not answer within ${connectTimeoutMs} ms ` +
      '(BATON_DB_CONNECT_TIMEOUT_MS); check DATABASE_URL'
    );
  }
  if (isUnavailableError(err)) return `${where} is not available (${message}); check DATABASE_URL`;
  return undefined;
}
