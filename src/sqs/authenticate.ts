import type { ApiKey } from '../auth/api-keys.js';
import type { SqsCredential } from './credentials.js';
import type { Authenticate } from './endpoint.js';
import { claimedAccessKeyId, verifySignature } from './sigv4.js';

/**
 * Authentication follows the native API's: with API keys configured, every SQS request must be
 * signed (Signature Version 4) with a pair from BATON_SQS_CREDENTIALS and acts as the API key the
 * pair names; an unsigned request is refused. With no API keys (the loopback-only development mode,
 * or BATON_ALLOW_UNAUTHENTICATED), requests are not checked, signed or not: SDKs always sign, with
 * whatever credentials they were given, and the key id they used becomes the SenderId.
 */
export function authenticator(keys: readonly ApiKey[], credentials: readonly SqsCredential[]): Authenticate {
  if (keys.length === 0) {
    return (request) => {
      const claimed = claimedAccessKeyId(request.headers);
      return {
        key: undefined,
        senderId: claimed && /^[A-Za-z0-9_]{1,128}$/.test(claimed) ? claimed : 'anonymous',
      };
    };
  }
  const byName = new Map(keys.map((key) => [key.name, key]));
  const pairs = new Map(credentials.map((pair) => [pair.accessKeyId, pair]));
  return (request) => {
    const { credential } = verifySignature(request, pairs, Date.now());
    // Start-up refuses a pair that names no configured key (startup-inputs.ts), so the lookup always
    // finds one.
    return { key: byName.get(credential.apiKey), senderId: credential.accessKeyId };
  };
}
