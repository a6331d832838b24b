import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { findKey, keyAllowsQueue } from '../../src/auth/api-keys.js';
import { loadStartup } from '../support/app.js';

const run = promisify(execFile);
const keygen = (...args: string[]) =>
  run(process.execPath, ['--import', 'tsx', 'src/cli/keygen.ts', ...args]);

describe('npm run keygen', () => {
  it('prints a key and a BATON_API_KEYS line that, pasted into a shell, configures Baton with it', async () => {
    const { stdout } = await keygen('billing-worker', 'consumer', 'billing.*');
    const [keyLine, exportLine] = stdout.split('\n');
    const secret = keyLine!.match(/: (bk_\S+)$/)![1]!;
    expect(exportLine).toMatch(/^export BATON_API_KEYS='\[.*\]'$/);

    // Paste the line into a real shell and read back what it set.
    const { stdout: value } = await run('bash', ['-c', `${exportLine}\nprintf %s "$BATON_API_KEYS"`]);
    const { apiKeys } = loadStartup({ BATON_API_KEYS: value });
    const key = findKey(apiKeys, secret)!;
    expect(key.name).toBe('billing-worker');
    expect([...key.scopes]).toEqual(['consumer']);
    expect(keyAllowsQueue(key, 'billing.invoices')).toBe(true);
    expect(keyAllowsQueue(key, 'emails')).toBe(false);
    expect(findKey(apiKeys, `${secret}x`)).toBeUndefined();
  });

  it('a bad scope is one line saying what is wrong, exit status 2', async () => {
    const failure = await keygen('ops', 'root').catch((err) => err);
    expect(failure.code).toBe(2);
    expect(failure.stderr).toBe(
      'cannot make that key: scopes must be a non-empty list of producer, consumer, admin\n',
    );
    expect(failure.stdout).toBe('');
  });
});
