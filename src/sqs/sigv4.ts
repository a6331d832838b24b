import { createHmac, createSecretKey, hash, type KeyObject, timingSafeEqual } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import type { SqsCredential } from './credentials.js';
import { SqsError } from './errors.js';

/**
 * AWS Signature Version 4, verified (the algorithm as AWS documents it: "Create a signed AWS API
 * request"). The client sends `Authorization: AWS4-HMAC-SHA256 Credential=<key id>/<yyyymmdd>/
 * <region>/sqs/aws4_request, SignedHeaders=<names>, Signature=<hex>` and `X-Amz-Date`. The server
 * rebuilds the canonical request from what arrived (method, path, query, the signed headers, and
 * the SHA-256 of the body as received), derives the signing key from the pair's secret, and compares
 * signatures in constant time. So the signature covers the body and the action, and a request
 * replayed more than 15 minutes from its date is refused.
 *
 * Tolerated, as the SDKs send them: any set of signed headers that includes `host` (and the
 * `x-amz-target` that names a JSON action, when there is one), `x-amz-content-sha256` (checked
 * against the body), `x-amz-security-token` and `x-amz-user-agent`; any region in the scope (queue
 * ARNs use BATON_SQS_REGION, but a client configured for its real region still gets in).
 * Not supported: presigned URLs (the signature in the query string), unsigned payloads.
 */

export interface SignedRequest {
  method: string;
  /** The request target as it arrived: path and query, still percent-encoded. */
  url: string;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

export interface Verified {
  credential: SqsCredential;
  region: string;
}

const ALGORITHM = 'AWS4-HMAC-SHA256';
const MAX_SKEW_MS = 15 * 60 * 1000;
const AMZ_DATE = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/;

/** The key id a request claims to be signed with (unverified), for SenderId when auth is off. */
export function claimedAccessKeyId(headers: IncomingHttpHeaders): string | undefined {
  return /Credential=([^/,\s]+)\//.exec(headers.authorization ?? '')?.[1];
}

export function verifySignature(
  request: SignedRequest,
  credentials: ReadonlyMap<string, SqsCredential>,
  nowMs: number,
): Verified {
  const header = request.headers.authorization;
  if (!header) {
    const presigned = /[?&]X-Amz-Signature=/i.test(request.url);
    throw new SqsError(
      'MissingAuthenticationToken',
      presigned
        ? 'Presigned requests are not supported; sign the Authorization header (AWS Signature Version 4).'
        : 'Request is missing Authentication Token: sign it with AWS Signature Version 4 using a key pair from BATON_SQS_CREDENTIALS.',
    );
  }
  const auth = parseAuthorization(header);
  const [keyId, date, region, service, terminator] = auth.credential.split('/');
  if (!keyId || !date || !region || service === undefined || terminator !== 'aws4_request') {
    throw new SqsError(
      'IncompleteSignature',
      "Credential must have the form '<access key id>/<yyyymmdd>/<region>/sqs/aws4_request'.",
    );
  }
  if (service !== 'sqs') {
    throw new SqsError('SignatureDoesNotMatch', `Credential should be scoped to correct service: 'sqs'.`);
  }
  const credential = credentials.get(keyId);
  if (!credential)
    throw new SqsError('InvalidClientTokenId', 'The security token included in the request is invalid.');

  const amzDate = single(request.headers['x-amz-date']);
  const parts = amzDate === undefined ? null : AMZ_DATE.exec(amzDate);
  if (!amzDate || !parts) {
    throw new SqsError(
      'IncompleteSignature',
      "Authorization header requires the 'X-Amz-Date' header (yyyymmddThhmmssZ).",
    );
  }
  if (date !== amzDate.slice(0, 8)) {
    throw new SqsError(
      'SignatureDoesNotMatch',
      `Credential should be scoped to a valid date: ${amzDate.slice(0, 8)}.`,
    );
  }
  const signedAt = Date.UTC(+parts[1]!, +parts[2]! - 1, +parts[3]!, +parts[4]!, +parts[5]!, +parts[6]!);
  if (Math.abs(nowMs - signedAt) > MAX_SKEW_MS) {
    throw new SqsError(
      'RequestExpired',
      `Request has expired: signed at ${amzDate}, the server's time is ${compactDate(nowMs)}; ` +
        'the difference may be at most 15 minutes.',
    );
  }

  const signedHeaders = auth.signedHeaders.split(';');
  if (!signedHeaders.includes('host')) {
    throw new SqsError('IncompleteSignature', "SignedHeaders must include 'host'.");
  }
  if (request.headers['x-amz-target'] !== undefined && !signedHeaders.includes('x-amz-target')) {
    throw new SqsError(
      'IncompleteSignature',
      "SignedHeaders must include 'x-amz-target', which names the action.",
    );
  }

  const payloadHash = hash('sha256', request.body, 'hex');
  const declared = single(request.headers['x-amz-content-sha256']);
  if (declared !== undefined && declared !== payloadHash) {
    throw new SqsError(
      'SignatureDoesNotMatch',
      "The 'x-amz-content-sha256' header does not match the body received (unsigned payloads are not accepted).",
    );
  }

  const key = signingKey(credential, date, region, service);
  const scope = `${date}/${region}/${service}/aws4_request`;
  const [path = '/', query = ''] = request.url.split(/\?(.*)/s);
  const headers = canonicalHeaders(request.headers, signedHeaders);
  const given = Buffer.from(auth.signature, 'hex');
  // The SDKs differ on how often a path is percent-encoded before signing (once, or once more); for
  // queue URLs and "/" both are the same, and trying both costs nothing elsewhere.
  for (const canonicalPath of new Set(canonicalPaths(path))) {
    const canonicalRequest = [
      request.method.toUpperCase(),
      canonicalPath,
      canonicalQuery(query),
      headers,
      auth.signedHeaders,
      payloadHash,
    ].join('\n');
    const stringToSign = [ALGORITHM, amzDate, scope, sha256Hex(canonicalRequest)].join('\n');
    const expected = createHmac('sha256', key).update(stringToSign).digest();
    if (timingSafeEqual(expected, given)) return { credential, region };
  }
  throw new SqsError(
    'SignatureDoesNotMatch',
    'The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method.',
  );
}

function parseAuthorization(header: string): {
  credential: string;
  signedHeaders: string;
  signature: string;
} {
  const space = header.indexOf(' ');
  const algorithm = space < 0 ? header : header.slice(0, space);
  if (algorithm !== ALGORITHM) {
    throw new SqsError('IncompleteSignature', `Unsupported authorization algorithm; use ${ALGORITHM}.`);
  }
  const fields = new Map<string, string>();
  for (const part of header.slice(space + 1).split(',')) {
    const eq = part.indexOf('=');
    if (eq > 0) fields.set(part.slice(0, eq).trim(), part.slice(eq + 1).trim());
  }
  const credential = fields.get('Credential');
  const signedHeaders = fields.get('SignedHeaders');
  const signature = fields.get('Signature');
  if (!credential || !signedHeaders || !signature) {
    throw new SqsError(
      'IncompleteSignature',
      "Authorization header requires 'Credential', 'SignedHeaders' and 'Signature' parameters.",
    );
  }
  if (!/^[0-9a-f]{64}$/.test(signature)) {
    throw new SqsError('IncompleteSignature', 'Signature must be 64 lowercase hexadecimal digits.');
  }
  if (!/^[a-z0-9-]+(;[a-z0-9-]+)*$/.test(signedHeaders)) {
    throw new SqsError(
      'IncompleteSignature',
      'SignedHeaders must be lowercase header names separated by ";".',
    );
  }
  return { credential, signedHeaders, signature };
}

/**
 * Signing keys, derived once per pair, day, region and service (four HMACs) rather than on every
 * request, and kept as KeyObjects, which HMAC without preparing the key again.
 */
const signingKeys = new WeakMap<SqsCredential, Map<string, KeyObject>>();
/** Scopes kept per pair: a few days and regions in use at once is plenty. */
const MAX_SCOPES = 16;

function signingKey(credential: SqsCredential, date: string, region: string, service: string): KeyObject {
  let keys = signingKeys.get(credential);
  if (!keys) {
    keys = new Map();
    signingKeys.set(credential, keys);
  }
  const scope = `${date}/${region}/${service}`;
  const cached = keys.get(scope);
  if (cached) return cached;
  const hmac = (key: string | Buffer, data: string) => createHmac('sha256', key).update(data).digest();
  const derived = hmac(
    hmac(hmac(hmac(`AWS4${credential.secretAccessKey}`, date), region), service),
    'aws4_request',
  );
  const key = createSecretKey(derived);
  if (keys.size >= MAX_SCOPES) keys.clear();
  keys.set(scope, key);
  return key;
}

function canonicalHeaders(headers: IncomingHttpHeaders, names: string[]): string {
  return names
    .map((name) => {
      const value = headers[name];
      const text = Array.isArray(value) ? value.join(',') : (value ?? '');
      return `${name}:${text.trim().replace(/\s+/g, ' ')}\n`;
    })
    .join('');
}

/** RFC 3986 encoding as SigV4 wants it: everything but A-Z a-z 0-9 - _ . ~ */
function uriEncode(text: string): string {
  return encodeURIComponent(text).replace(
    /[!'()*]/g,
    (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`,
  );
}

/** The path with dot segments and empty segments removed, as it arrived and encoded once more. */
function canonicalPaths(raw: string): string[] {
  const segments: string[] = [];
  for (const segment of raw.split('/')) {
    if (segment === '' || segment === '.') continue;
    if (segment === '..') segments.pop();
    else segments.push(segment);
  }
  const trailing = segments.length > 0 && raw.endsWith('/') ? '/' : '';
  const once = `/${segments.join('/')}${trailing}`;
  const twice = `/${segments.map(uriEncode).join('/')}${trailing}`;
  return [once, twice];
}

function canonicalQuery(query: string): string {
  if (query === '') return '';
  const pairs = query
    .split('&')
    .filter(Boolean)
    .map((pair) => {
      const eq = pair.indexOf('=');
      const key = eq < 0 ? pair : pair.slice(0, eq);
      const value = eq < 0 ? '' : pair.slice(eq + 1);
      return [uriEncode(decode(key)), uriEncode(decode(value))] as const;
    });
  pairs.sort(([ka, va], [kb, vb]) => (ka < kb ? -1 : ka > kb ? 1 : va < vb ? -1 : va > vb ? 1 : 0));
  return pairs.map(([k, v]) => `${k}=${v}`).join('&');
}

function decode(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

const single = (value: string | string[] | undefined) => (Array.isArray(value) ? value[0] : value);
const sha256Hex = (text: string) => hash('sha256', text, 'hex');
const compactDate = (ms: number) =>
  new Date(ms)
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d{3}/, '');
