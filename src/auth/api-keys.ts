import { createHash, timingSafeEqual } from 'node:crypto';

/**
 * API keys. A key is configured by the SHA-256 of its secret (never the secret itself), a name for
 * logs, its scopes, and optionally the queue-name patterns it may touch:
 *
 *   [{ "name": "billing-producer", "sha256": "<64 hex>", "scopes": ["producer"], "queues": ["billing.*"] }]
 *
 * Scopes: `producer` (enqueue, read jobs), `consumer` (claim, renew, ack, nack, read jobs), `admin`
 * (everything). Patterns are queue names where `*` matches any run of characters.
 */
export const SCOPES = ['producer', 'consumer', 'admin'] as const;
export type Scope = (typeof SCOPES)[number];

export interface ApiKey {
  name: string;
  digest: Buffer;
  scopes: ReadonlySet<Scope>;
  /** undefined: every queue. */
  queues?: readonly RegExp[];
}

export function sha256(secret: string): Buffer {
  return createHash('sha256').update(secret, 'utf8').digest();
}

function patternToRegExp(pattern: string): RegExp {
  const escaped = pattern.replace(/[.+?^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '.*');
  return new RegExp(`^${escaped}$`);
}

/** Parse and validate a JSON list of keys; errors name the entry and field. */
export function parseApiKeys(json: string): ApiKey[] {
  let list: unknown;
  try {
    list = JSON.parse(json);
  } catch (err) {
    throw new Error(`is not valid JSON: ${(err as Error).message}`);
  }
  if (!Array.isArray(list)) throw new Error('must be a JSON array of keys');
  const names = new Set<string>();
  return list.map((entry: unknown, i) => {
    const at = `[${i}]`;
    if (typeof entry !== 'object' || entry === null) throw new Error(`${at} must be an object`);
    const { name, sha256: digest, scopes, queues, ...rest } = entry as Record<string, unknown>;
    const unknown = Object.keys(rest);
    if (unknown.length > 0) throw new Error(`${at}.${unknown[0]} is not a known field`);
    if (typeof name !== 'string' || !/^[\w.-]{1,64}$/.test(name))
      throw new Error(`${at}.name must be 1-64 letters, digits, ".", "_" or "-"`);
    if (names.has(name)) throw new Error(`${at}.name "${name}" is used twice`);
    names.add(name);
    if (typeof digest !== 'string' || !/^[0-9a-fA-F]{64}$/.test(digest)) {
      throw new Error(`${at}.sha256 must be the 64 hex digits of the key's SHA-256`);
    }
    if (
      !Array.isArray(scopes) ||
      scopes.length === 0 ||
      !scopes.every((s) => (SCOPES as readonly unknown[]).includes(s))
    ) {
      throw new Error(`${at}.scopes must be a non-empty list of ${SCOPES.join(', ')}`);
    }
    if (
      queues !== undefined &&
      (!Array.isArray(queues) ||
        !queues.every((q) => typeof q === 'string' && /^[A-Za-z0-9._*-]{1,128}$/.test(q)))
    ) {
      throw new Error(`${at}.queues must be a list of queue names, where * matches anything`);
    }
    return {
      name,
      digest: Buffer.from(digest, 'hex'),
      scopes: new Set(scopes as Scope[]),
      queues: queues === undefined ? undefined : (queues as string[]).map(patternToRegExp),
    };
  });
}

/**
 * The key a presented secret belongs to, if any. Every configured digest is compared, in constant
 * time, whether or not an earlier one matched, so timing says nothing about which keys exist.
 */
export function findKey(keys: readonly ApiKey[], secret: string): ApiKey | undefined {
  const digest = sha256(secret);
  let found: ApiKey | undefined;
  for (const key of keys) if (timingSafeEqual(key.digest, digest) && !found) found = key;
  return found;
}

export function keyAllowsQueue(key: ApiKey, queue: string): boolean {
  return key.queues === undefined || key.queues.some((re) => re.test(queue));
}

/**
 * A key's queue patterns as PostgreSQL regular expressions (for `name ~ ANY(...)`), so a listing
 * filters in SQL; undefined for a key that may use every queue. Patterns hold only queue-name
 * characters and `*`, so the JavaScript source of each reads the same in PostgreSQL.
 */
export function queuePatternsOf(key: ApiKey | undefined): string[] | undefined {
  return key?.queues?.map((re) => re.source);
}
