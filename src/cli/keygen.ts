import { randomBytes } from 'node:crypto';
import { parseApiKeys, SCOPES, sha256 } from '../auth/api-keys.js';

/**
 * `npm run keygen -- <name> <scopes> [queue patterns]`: make a new API key. Prints the secret (give
 * it to the client; it is not stored anywhere) and the entry to add to BATON_API_KEYS or the keys
 * file (which holds only its SHA-256).
 *
 *   npm run keygen -- billing-worker consumer 'billing.*'
 */
const [name, scopes, queues] = process.argv.slice(2);
if (!name || !scopes) {
  console.error(`usage: npm run keygen -- <name> <${SCOPES.join('|')}>[,...] [queue-pattern,...]`);
  process.exit(2);
}
const secret = `bk_${randomBytes(32).toString('base64url')}`;
const entry = {
  name,
  sha256: sha256(secret).toString('hex'),
  scopes: scopes.split(','),
  ...(queues ? { queues: queues.split(',') } : {}),
};
parseApiKeys(JSON.stringify([entry])); // validate before printing
console.log(`key (give this to the client; it is shown once): ${secret}`);
console.log(`config entry: ${JSON.stringify(entry)}`);
