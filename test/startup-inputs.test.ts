import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../src/config.js';
import { loadStartupInputs, startupWarnings } from '../src/startup-inputs.js';

const load = (env: Record<string, string>) => loadStartupInputs(loadConfig(env));
const warningsFor = (env: Record<string, string>) => {
  const config = loadConfig(env);
  return startupWarnings(config, loadStartupInputs(config));
};

describe('start-up inputs (API keys, SQS key pairs; the schedules file is tested in test/schedules/)', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'baton-inputs-'));
  const write = (name: string, value: unknown) => {
    const file = path.join(dir, name);
    fs.writeFileSync(file, JSON.stringify(value));
    return file;
  };
  const entry = (name: string) => ({ name, sha256: 'a'.repeat(64), scopes: ['admin'] });
  const pair = (id: string, apiKey: string) => ({
    access_key_id: id,
    secret_access_key: 'a-secret-of-enough-length',
    api_key: apiKey,
  });

  it('adds the files to the inline values; a name or key id given twice across them stops start-up', () => {
    const inputs = load({
      BATON_API_KEYS: JSON.stringify([entry('a')]),
      BATON_API_KEYS_FILE: write('keys.json', [entry('b')]),
      BATON_SQS_CREDENTIALS: JSON.stringify([pair('AKIAA', 'a')]),
      BATON_SQS_CREDENTIALS_FILE: write('pairs.json', [pair('AKIAB', 'b')]),
    });
    expect(inputs.apiKeys.map((k) => k.name)).toEqual(['a', 'b']);
    expect(inputs.sqsCredentials.map((p) => p.accessKeyId)).toEqual(['AKIAA', 'AKIAB']);
    expect(inputs.fileSchedules).toBeUndefined();
    expect(() =>
      load({
        BATON_API_KEYS: JSON.stringify([entry('a')]),
        BATON_API_KEYS_FILE: write('same-key.json', [entry('a')]),
      }),
    ).toThrow('BATON_API_KEYS and BATON_API_KEYS_FILE name the same key twice');
    expect(() =>
      load({
        BATON_API_KEYS: JSON.stringify([entry('a')]),
        BATON_SQS_CREDENTIALS: JSON.stringify([pair('AKIAA', 'a')]),
        BATON_SQS_CREDENTIALS_FILE: write('same-pair.json', [pair('AKIAA', 'a')]),
      }),
    ).toThrow('BATON_SQS_CREDENTIALS and BATON_SQS_CREDENTIALS_FILE both hold AKIAA');
  });

  it('names every bad variable in one ConfigError, as a bad setting does', () => {
    let error: unknown;
    try {
      load({
        BATON_API_KEYS: 'not json',
        BATON_SQS_CREDENTIALS_FILE: '/nonexistent/pairs.json',
        BATON_SCHEDULES_FILE: '/nonexistent/schedules.yaml',
      });
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).problems).toEqual([
      expect.stringMatching(/^BATON_API_KEYS is not valid JSON/),
      expect.stringMatching(/^BATON_SCHEDULES_FILE cannot be read/),
      expect.stringMatching(/^BATON_SQS_CREDENTIALS_FILE cannot be read/),
    ]);
  });

  it('SQS key pairs: each names a configured API key, ids are unique, errors never show the secret', () => {
    const keys = JSON.stringify([{ name: 'worker', sha256: 'a'.repeat(64), scopes: ['consumer'] }]);
    const pair = {
      access_key_id: 'AKIAWORKER',
      secret_access_key: 'a-secret-of-enough-length',
      api_key: 'worker',
    };
    const inputs = load({ BATON_API_KEYS: keys, BATON_SQS_CREDENTIALS: JSON.stringify([pair]) });
    expect(inputs.sqsCredentials).toEqual([
      { accessKeyId: 'AKIAWORKER', secretAccessKey: 'a-secret-of-enough-length', apiKey: 'worker' },
    ]);
    expect(() =>
      load({
        BATON_API_KEYS: keys,
        BATON_SQS_CREDENTIALS: JSON.stringify([{ ...pair, api_key: 'nobody' }]),
      }),
    ).toThrow(/pair AKIAWORKER names API key "nobody", which is not configured/);
    expect(() => load({ BATON_API_KEYS: keys, BATON_SQS_CREDENTIALS: JSON.stringify([pair, pair]) })).toThrow(
      /access_key_id "AKIAWORKER" is used twice/,
    );
    let message = '';
    try {
      load({
        BATON_API_KEYS: keys,
        BATON_SQS_CREDENTIALS: JSON.stringify([{ ...pair, secret_access_key: 'short secret' }]),
      });
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).toMatch(/secret_access_key must be 16-128 printable ASCII characters/);
    expect(message).not.toContain('short secret');
  });

  it('warns when queue-limited keys are configured and /metrics, which names every queue, is open', () => {
    const key = (name: string, queues?: string[]) => ({
      name,
      sha256: 'a'.repeat(64),
      scopes: ['admin'],
      queues,
    });
    const keys = JSON.stringify([key('root'), key('team-a', ['a.*']), key('team-b', ['b.*'])]);
    const warnings = warningsFor({ BATON_API_KEYS: keys });
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(/^\/metrics answers without a key and shows every queue's name/);
    expect(warnings[0]).toContain('(team-a, team-b)');
    expect(warnings[0]).toContain('set BATON_OPEN_ENDPOINTS=readyz,docs');
    expect(warningsFor({ BATON_API_KEYS: keys, BATON_OPEN_ENDPOINTS: 'metrics' })[0]).toContain(
      'set BATON_OPEN_ENDPOINTS=none',
    );
    // Protected /metrics, or no tenants: nothing to say.
    expect(warningsFor({ BATON_API_KEYS: keys, BATON_OPEN_ENDPOINTS: 'readyz,docs' })).toEqual([]);
    expect(warningsFor({ BATON_API_KEYS: JSON.stringify([key('root')]) })).toEqual([]);
    expect(warningsFor({})).toEqual([]);
  });

  it('warns when a non-loopback address is served without keys (BATON_ALLOW_UNAUTHENTICATED)', () => {
    expect(warningsFor({ HOST: '0.0.0.0', BATON_ALLOW_UNAUTHENTICATED: 'true' })).toEqual([
      'BATON_ALLOW_UNAUTHENTICATED: serving a non-loopback address with no API keys',
    ]);
  });
});
