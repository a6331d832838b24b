import { sha256 } from '../../src/auth/api-keys.js';

/**
 * API keys and SQS key pairs for tests that configure authentication: each key's secret is derived
 * from its name, so a test names who calls and the helpers give the configuration and the headers.
 */

/** The secret of the test key `name`. */
export const secretOf = (name: string) => `${name}-secret`;

/** An entry of BATON_API_KEYS for the test key `name` (stored, as configured keys are, as a digest). */
export const apiKeyEntry = (name: string, scopes: string[], queues?: string[]) => ({
  name,
  sha256: sha256(secretOf(name)).toString('hex'),
  scopes,
  ...(queues ? { queues } : {}),
});

/** The Authorization header of the test key `name`. */
export const bearer = (name: string) => ({ authorization: `Bearer ${secretOf(name)}` });

/** An entry of BATON_SQS_CREDENTIALS that acts as the test key `name`. */
export const sqsPairOf = (name: string) => ({
  access_key_id: `AKIA${name.toUpperCase().replace(/[^A-Z0-9]/g, '_')}`,
  secret_access_key: `${name}-secret-access-key-0123456789`,
  api_key: name,
});
