/**
 * Key pairs for the SQS endpoint. AWS Signature Version 4 is an HMAC keyed by the secret access
 * key, so the server must hold the secret itself (unlike Baton's API keys, kept only as digests).
 * Each pair names the API key whose scopes and queue patterns a request signed with it gets:
 *
 *   [{ "access_key_id": "BATONBILLING0001", "secret_access_key": "<40 random characters>",
 *      "api_key": "billing-worker" }]
 *
 * Access key ids are public (they travel in every request); secrets are never logged.
 */
export interface SqsCredential {
  accessKeyId: string;
  secretAccessKey: string;
  /** Name of the BATON_API_KEYS entry whose scopes and queue patterns apply. */
  apiKey: string;
}

const ACCESS_KEY_ID = /^[A-Za-z0-9_]{3,128}$/;
/** AWS secrets are 40 characters; anything shorter than 16 is too easy to guess. */
const SECRET = /^[\x21-\x7e]{16,128}$/;

/** Parse and validate a JSON list of pairs; errors name the entry and field, never the secret. */
export function parseSqsCredentials(json: string): SqsCredential[] {
  let list: unknown;
  try {
    list = JSON.parse(json);
  } catch (err) {
    throw new Error(`is not valid JSON: ${(err as Error).message}`);
  }
  if (!Array.isArray(list)) throw new Error('must be a JSON array of key pairs');
  const ids = new Set<string>();
  return list.map((entry: unknown, i) => {
    const at = `[${i}]`;
    if (typeof entry !== 'object' || entry === null) throw new Error(`${at} must be an object`);
    const {
      access_key_id: accessKeyId,
      secret_access_key: secretAccessKey,
      api_key: apiKey,
      ...rest
    } = entry as Record<string, unknown>;
    const unknown = Object.keys(rest);
    if (unknown.length > 0) throw new Error(`${at}.${unknown[0]} is not a known field`);
    if (typeof accessKeyId !== 'string' || !ACCESS_KEY_ID.test(accessKeyId)) {
      throw new Error(`${at}.access_key_id must be 3-128 letters, digits or "_"`);
    }
    if (ids.has(accessKeyId)) throw new Error(`${at}.access_key_id "${accessKeyId}" is used twice`);
    ids.add(accessKeyId);
    if (typeof secretAccessKey !== 'string' || !SECRET.test(secretAccessKey)) {
      throw new Error(`${at}.secret_access_key must be 16-128 printable ASCII characters without spaces`);
    }
    if (typeof apiKey !== 'string' || apiKey === '') {
      throw new Error(`${at}.api_key must name an entry of BATON_API_KEYS or BATON_API_KEYS_FILE`);
    }
    return { accessKeyId, secretAccessKey, apiKey };
  });
}
