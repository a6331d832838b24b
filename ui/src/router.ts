import { useEffect, useState } from 'preact/hooks';

/**
 * Pages live in the URL's fragment (#/queues/emails?state=dead), so every page can be bookmarked
 * and shared while the server serves one fixed page: no route on the server per page, and no
 * secret ever in the URL (the key is in sessionStorage).
 */

export interface Location {
  path: string;
  query: URLSearchParams;
}

export function currentLocation(): Location {
  const raw = location.hash.replace(/^#/, '') || '/';
  const [path = '/', query = ''] = raw.split('?');
  return { path, query: new URLSearchParams(query) };
}

export function useLocation(): Location {
  const [where, setWhere] = useState(currentLocation);
  useEffect(() => {
    const update = () => setWhere(currentLocation());
    window.addEventListener('hashchange', update);
    return () => window.removeEventListener('hashchange', update);
  }, []);
  return where;
}

/** The href of a page: `href('/queues', name)` → `#/queues/<name>` (parts are URL-encoded). */
export function href(...parts: string[]): string {
  const [first = '', ...rest] = parts;
  return `#${[first, ...rest.map(encodeURIComponent)].join('/')}`;
}

/** Change the query part of the current page (filters), keeping the path. */
export function setQuery(values: Record<string, string | undefined>): void {
  const { path, query } = currentLocation();
  for (const [k, v] of Object.entries(values)) {
    if (v === undefined) query.delete(k);
    else query.set(k, v);
  }
  const qs = query.toString();
  location.hash = qs ? `${path}?${qs}` : path;
}

/** Match `path` against a pattern such as /queues/:queue; the decoded parameters, or undefined. */
export function match(pattern: string, path: string): Record<string, string> | undefined {
  const want = pattern.split('/');
  const have = path.split('/');
  if (want.length !== have.length) return undefined;
  const params: Record<string, string> = {};
  for (const [i, part] of want.entries()) {
    const value = have[i]!;
    if (part.startsWith(':')) {
      if (value === '') return undefined;
      try {
        params[part.slice(1)] = decodeURIComponent(value);
      } catch {
        return undefined;
      }
    } else if (part !== value) return undefined;
  }
  return params;
}
