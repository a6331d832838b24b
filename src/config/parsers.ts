import { isIP } from 'node:net';
import { parseHostList } from './database-url.js';

/**
 * How a setting is declared (variable, default, unit, doc, parser) and the parsers the table in
 * settings.ts uses. Each parser takes the variable's text and returns its value or throws a message
 * that reads after the variable's name ("must be between 2 and 1000, got 0"). Imports nothing.
 */

/** Turns a variable's text into its value, or throws a message that follows the variable's name. */
export type Parser<T> = (raw: string) => T;

export interface Setting<T> {
  env: string;
  default: T | undefined;
  unit: string;
  doc: string;
  parse: Parser<T>;
  /** Optional settings have no default: unset means "not given". */
  optional?: true;
}

export function setting<T>(s: Omit<Setting<T>, 'optional'> & { default: T }): Setting<T> {
  return s;
}

export function optional<T>(s: Omit<Setting<T>, 'optional' | 'default'>): Setting<T> & { optional: true } {
  return { ...s, default: undefined, optional: true };
}

export const integer =
  (min: number, max: number): Parser<number> =>
  (raw) => {
    if (!/^-?\d+$/.test(raw.trim())) throw new Error(`must be an integer, got "${raw}"`);
    const value = Number(raw.trim());
    if (!Number.isSafeInteger(value) || value < min || value > max) {
      throw new Error(`must be between ${min} and ${max}, got ${raw}`);
    }
    return value;
  };

export const boolean: Parser<boolean> = (raw) => {
  const value = raw.trim().toLowerCase();
  if (['true', '1', 'yes', 'on'].includes(value)) return true;
  if (['false', '0', 'no', 'off'].includes(value)) return false;
  throw new Error(`must be true or false, got "${raw}"`);
};

export const oneOf =
  <T extends string>(...values: T[]): Parser<T> =>
  (raw) => {
    const value = raw.trim() as T;
    if (!values.includes(value)) throw new Error(`must be one of ${values.join(', ')}, got "${raw}"`);
    return value;
  };

export const text: Parser<string> = (raw) => {
  if (raw.trim() === '') throw new Error('must not be empty');
  return raw.trim();
};

export const postgresUrl: Parser<string> = (raw) => {
  let url: URL;
  // Several hosts (host1:5432,host2:5432) are split off first: the URL parser takes one.
  const list = parseHostList(raw.trim());
  try {
    url = new URL(list.url);
  } catch {
    throw new Error('must be a URL such as postgres://user:password@host:5432/database');
  }
  if (url.protocol !== 'postgres:' && url.protocol !== 'postgresql:') {
    throw new Error(`must use the postgres:// scheme, got "${url.protocol}"`);
  }
  return raw.trim();
};

/**
 * JSON text (API keys, SQS key pairs) kept as it is, and a file's path, not read here: their rules
 * are the domain's, applied at start-up by src/startup-inputs.ts.
 */
export const jsonText: Parser<string> = (raw) => raw;
export const filePath: Parser<string> = (raw) => raw.trim();

export const pattern =
  (re: RegExp, what: string): Parser<string> =>
  (raw) => {
    if (!re.test(raw.trim())) throw new Error(`must be ${what}, got "${raw}"`);
    return raw.trim();
  };

/** `raw` as an http(s) URL; else `notUrl`, or `notHttp` of the scheme it has. */
function webUrl(raw: string, notUrl: string, notHttp: (protocol: string) => string): URL {
  let url: URL;
  try {
    url = new URL(raw.trim());
  } catch {
    throw new Error(notUrl);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error(notHttp(url.protocol));
  return url;
}

const SQS_URL_RULE = 'must be an http(s) URL without query or fragment, such as https://sqs.example.com';

export const httpUrl: Parser<string> = (raw) => {
  const url = webUrl(raw, 'must be a URL such as https://sqs.example.com', () => SQS_URL_RULE);
  if (url.search || url.hash) throw new Error(SQS_URL_RULE);
  return url.toString().replace(/\/$/, '');
};

const OPEN_ENDPOINTS = ['readyz', 'metrics', 'docs'] as const;
export type OpenEndpoint = (typeof OPEN_ENDPOINTS)[number];

export const endpointList: Parser<OpenEndpoint[]> = (raw) => {
  const items = raw
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  const bad = items.find((i) => !(OPEN_ENDPOINTS as readonly string[]).includes(i) && i !== 'none');
  if (bad)
    throw new Error(`must be a comma-separated list of ${OPEN_ENDPOINTS.join(', ')} (or none), got "${bad}"`);
  return items.filter((i) => i !== 'none') as OpenEndpoint[];
};

/** BATON_PUSH_ALLOW: comma-separated entries, each checked by push/allow-list.ts's rules. */
export const pushAllowList: Parser<string[]> = (raw) => {
  const items = raw
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  for (const item of items) {
    const error = allowEntryError(item);
    if (error)
      throw new Error(`must be a comma-separated list of *, host names, addresses and CIDRs: ${error}`);
  }
  return items;
};

/** One entry of BATON_PUSH_ALLOW is well formed: `*`, a host, an address or a CIDR (push/allow-list.ts reads them). */
function allowEntryError(entry: string): string | undefined {
  if (entry === '*') return undefined;
  const [address, bits, extra] = entry.split('/');
  const family = isIP(address!);
  if (family !== 0) {
    if (extra !== undefined) return `"${entry}" is not an address or CIDR`;
    if (bits === undefined) return undefined;
    const n = Number(bits);
    return /^\d+$/.test(bits) && n <= (family === 4 ? 32 : 128)
      ? undefined
      : `"${entry}" has a bad prefix length`;
  }
  return /^(\*\.)?[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$/i.test(entry)
    ? undefined
    : `"${entry}" is not *, a host name, an address or a CIDR`;
}

/** An OTLP endpoint: an http(s) URL, kept as given but for a trailing slash. */
export const otlpUrl: Parser<string> = (raw) => {
  webUrl(
    raw,
    'must be a URL such as http://collector:4318',
    (protocol) => `must be an http(s) URL (OTLP over HTTP), got "${protocol}"`,
  );
  return raw.trim().replace(/\/$/, '');
};

/**
 * A W3C-baggage-style list, as OpenTelemetry's variables write it: `key=value,key2=value2`, each
 * value percent-encoded (OTEL_EXPORTER_OTLP_HEADERS, OTEL_RESOURCE_ATTRIBUTES).
 */
export const keyValueList: Parser<Record<string, string>> = (raw) => {
  const out: Record<string, string> = {};
  for (const member of raw.split(',')) {
    if (member.trim() === '') continue;
    const eq = member.indexOf('=');
    const key = eq > 0 ? member.slice(0, eq).trim() : '';
    if (key === '') throw new Error(`must be a list of key=value, got "${member.trim()}"`);
    try {
      out[key] = decodeURIComponent(member.slice(eq + 1).trim());
    } catch {
      throw new Error(`has a value that is not percent-encoded text, in "${key}"`);
    }
  }
  return out;
};

/** A number from 0 to 1 (a sampling ratio). */
export const fraction: Parser<number> = (raw) => {
  const value = Number(raw.trim());
  if (!/^\d*\.?\d+$/.test(raw.trim()) || !(value >= 0 && value <= 1)) {
    throw new Error(`must be a number from 0 to 1, got "${raw}"`);
  }
  return value;
};
