import { randomBytes } from 'node:crypto';
import { parseApiKeys, SCOPES, sha256 } from '../auth/api-keys.js';

/**
 * `npm run keygen -- <name> <scopes> [queue patterns]`: make a new API key. Prints the secret (give
 * it to the client; it is not stored anywhere), then BATON_API_KEYS holding just this key, ready to
 * paste into a shell, and the entry to add to a list of keys you already have (only its SHA-256).
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
const list = JSON.stringify([entry]);
try {
  parseApiKeys(list);
} catch (err) {
  console.error(`cannot make that key: ${(err as Error).message.replace(/^\[0\]\./, '')}`);
  process.exit(2);
}
// Names and queue patterns cannot hold a single quote (parseApiKeys), so this quoting is safe.
console.log(`key (give this to the client; it is shown once): ${secret}`);
console.log(`export BATON_API_KEYS='${list}'`);
console.log(`(to keep keys you already have, add this entry to their JSON array: ${JSON.stringify(entry)})`);
