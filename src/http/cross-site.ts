import type { IncomingHttpHeaders } from 'node:http';

/**
 * Cross-site request forgery: a page of another site can make a visitor's browser send a bare
 * POST here (a form, or a fetch in no-cors mode). With keys configured it cannot attach the key,
 * but with none (a developer's loopback server) nothing else would stop it. So a write (any method
 * but GET, HEAD and OPTIONS) is refused when the browser says it comes from elsewhere:
 *
 * - `Sec-Fetch-Site: cross-site` or `same-site` (the dashboard's own calls are `same-origin`);
 * - an `Origin` that is not this server's own, for browsers that send no Sec-Fetch-Site (Safari
 *   before 16.4) but do send Origin on a POST; `Origin: null` (a sandboxed frame, a file:// page, a
 *   redirect from another site) is never this server's own.
 *
 * No Origin at all passes: curl and other clients send none, and browsers always send one on a
 * cross-origin write. "Own" compares host and port, not the scheme: behind a TLS-terminating proxy
 * the request reaches Baton over http while the page's origin is https, and Baton does not trust
 * X-Forwarded-Proto (no trustProxy). The request's host is its Host header, or its X-Forwarded-Host
 * (a proxy that rewrites Host says there which one the browser used). A page cannot forge either:
 * a browser never lets a script set Host, and setting X-Forwarded-Host on a cross-origin request
 * needs a CORS preflight that Baton never grants. A Host without a port stands for the default port
 * of the Origin's scheme (443 for https), which is what a browser leaves out.
 */

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/** Why this write is refused as coming from another site (for the 403's detail), else undefined. */
export function crossSiteWrite(request: {
  method: string;
  headers: IncomingHttpHeaders;
}): string | undefined {
  if (SAFE_METHODS.has(request.method)) return undefined;
  const { headers } = request;
  const site = headers['sec-fetch-site'];
  if (site === 'cross-site' || site === 'same-site') return `the browser sent Sec-Fetch-Site: ${site}`;
  const origin = headers.origin;
  if (origin === undefined) return undefined;
  if (origin === 'null') return 'the browser sent Origin: null (a sandboxed or local page)';
  const from = originHost(origin);
  const own = [headers.host, firstValue(headers['x-forwarded-host'])];
  if (from && own.some((host) => host !== undefined && hostPort(host, from.defaultPort) === from.hostPort)) {
    return undefined;
  }
  return (
    `the browser sent Origin: ${shown(origin)}, which is not this server (Host: ${shown(headers.host ?? '')}; ` +
    'behind a proxy that rewrites Host, have it send the original as X-Forwarded-Host)'
  );
}

/** `hostname:port` of an http(s) origin, and the default port of its scheme. */
function originHost(origin: string): { hostPort: string; defaultPort: string } | undefined {
  let url: URL;
  try {
    url = new URL(origin);
  } catch {
    return undefined;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return undefined;
  const defaultPort = url.protocol === 'https:' ? '443' : '80';
  return { hostPort: `${url.hostname}:${url.port || defaultPort}`, defaultPort };
}

/** A Host header's `hostname:port` (lower case; an IPv6 address keeps its brackets). */
function hostPort(host: string, defaultPort: string): string | undefined {
  const m = /^(\[[0-9A-Fa-f:.]+\]|[^:[\]]+)(?::(\d{1,5}))?$/.exec(host.trim());
  if (!m) return undefined;
  return `${m[1]!.toLowerCase()}:${m[2] === undefined ? defaultPort : String(Number(m[2]))}`;
}

/** The first of a comma-separated header: the host the client asked for, before further proxies. */
const firstValue = (value: string | string[] | undefined) =>
  (Array.isArray(value) ? value[0] : value)?.split(',')[0]?.trim();

/** A header value as the detail shows it: short, and on one line. */
const shown = (value: string) => JSON.stringify(value.length > 100 ? `${value.slice(0, 97)}...` : value);
