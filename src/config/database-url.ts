/**
 * A database URL naming several hosts, as libpq takes it and as failover managers print it
 * (`pg_autoctl show uri`: postgres://user@host1:5432,host2:5432/db?target_session_attrs=read-write).
 * node-postgres takes one host, so the list is split off here: pg gets the URL with the first host,
 * and db/primary-locator.ts chooses which host each connection really goes to.
 */

export interface HostPort {
  host: string;
  port: number;
}

/** libpq's target_session_attrs values Baton accepts: it writes, so `any` only with one host. */
export type SessionTarget = 'any' | 'read-write' | 'primary';

export interface HostList {
  /** The URL with the first host alone and without target_session_attrs: what node-postgres parses. */
  url: string;
  hosts: HostPort[];
  target: SessionTarget;
  /** The URL naming this one host (node-postgres's host and port options lose to a URL's). */
  urlOf: (host: HostPort) => string;
}

const TARGETS: readonly string[] = ['any', 'read-write', 'primary'];

/** Thrown at startup for a URL Baton cannot use; the message names what to change. */
export class HostListError extends Error {}

/**
 * Split a database URL into its hosts. A URL with one host (or a socket path) comes back as it was,
 * with that host alone. Several hosts need target_session_attrs=read-write (or primary): with `any`,
 * the first host that answers would be used even when it is a standby that cannot write.
 */
export function parseHostList(url: string): HostList {
  const match = /^(postgres(?:ql)?:\/\/)([^/?#]*@)?([^/?#]*)(.*)$/.exec(url);
  if (!match) return { url, hosts: [], target: 'any', urlOf: () => url };
  const [, scheme, userinfo = '', hostPart = '', rest = ''] = match;
  const [path, query = ''] = splitOnce(rest, '?');
  const params = new URLSearchParams(query);
  const targetParam = params.get('target_session_attrs') ?? 'any';
  if (!TARGETS.includes(targetParam)) {
    throw new HostListError(
      `DATABASE_URL: target_session_attrs=${targetParam} is not one Baton can use (read-write, primary or any)`,
    );
  }
  const target = targetParam as SessionTarget;
  params.delete('target_session_attrs');
  const hosts = hostPart === '' ? [] : hostPart.split(',').map(hostPortOf);
  if (hosts.length > 1 && target === 'any') {
    throw new HostListError(
      'DATABASE_URL names several hosts: add target_session_attrs=read-write so that Baton writes to the primary',
    );
  }
  const search = params.toString();
  const tail = `${path}${search ? `?${search}` : ''}`;
  const first = hostPart.split(',')[0] ?? '';
  const urlOf = ({ host, port }: HostPort) =>
    `${scheme}${userinfo}${host.includes(':') ? `[${host}]` : encodeURIComponent(host)}:${port}${tail}`;
  return { url: `${scheme}${userinfo}${first}${tail}`, hosts, target, urlOf };
}

function splitOnce(text: string, separator: string): [string, string | undefined] {
  const at = text.indexOf(separator);
  return at < 0 ? [text, undefined] : [text.slice(0, at), text.slice(at + 1)];
}

function hostPortOf(entry: string): HostPort {
  // [::1]:5432, host:5432, or a host with the default port.
  const bracketed = /^\[([^\]]+)\](?::(\d+))?$/.exec(entry);
  const [host, port] = bracketed
    ? [bracketed[1]!, bracketed[2]]
    : entry.includes(':')
      ? splitOnce(entry, ':')
      : [entry, undefined];
  if (host === '') throw new HostListError(`DATABASE_URL: a host in the list is empty ("${entry}")`);
  const number = port === undefined || port === '' ? 5432 : Number(port);
  if (!Number.isInteger(number) || number < 1 || number > 65535) {
    throw new HostListError(`DATABASE_URL: ${entry} has no valid port`);
  }
  return { host: decodeURIComponent(host), port: number };
}
