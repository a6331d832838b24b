import { describe, expect, it } from 'vitest';
import { ConfigError, configWarnings, loadConfig } from '../src/config.js';

describe('config', () => {
  it('has documented defaults when nothing is set', () => {
    const config = loadConfig({});
    expect(config.port).toBe(8080);
    expect(config.host).toBe('127.0.0.1');
    expect(config.databaseUrl).toBeUndefined();
    expect(config.defaultLeaseMs).toBe(30_000);
    expect(config.tickMs).toBe(5_000);
    expect(config.payloadLimitBytes).toBe(256 * 1024);
    expect(Object.isFrozen(config)).toBe(true);
  });

  it('parses values with their types', () => {
    const config = loadConfig({
      PORT: '9000',
      DATABASE_URL: 'postgres://u:p@db:5432/baton',
      BATON_AUTO_CREATE_QUEUES: 'false',
      LOG_LEVEL: 'debug',
    });
    expect(config.port).toBe(9000);
    expect(config.databaseUrl).toBe('postgres://u:p@db:5432/baton');
    expect(config.autoCreateQueues).toBe(false);
    expect(config.logLevel).toBe('debug');
  });

  it('names every bad variable in one error', () => {
    let error: unknown;
    try {
      loadConfig({ PORT: 'eighty', BATON_DB_POOL_SIZE: '0', LOG_LEVEL: 'loud', DATABASE_URL: 'mysql://x' });
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const problems = (error as ConfigError).problems.join('\n');
    expect(problems).toMatch(/PORT must be an integer/);
    expect(problems).toMatch(/BATON_DB_POOL_SIZE must be between 2 and 1000/);
    expect(problems).toMatch(/LOG_LEVEL must be one of/);
    expect(problems).toMatch(/DATABASE_URL must use the postgres:\/\/ scheme/);
  });

  it('rejects a lease outside its bounds and a backoff cap below its base', () => {
    expect(() => loadConfig({ BATON_DEFAULT_LEASE_MS: '10' })).toThrow(
      /BATON_DEFAULT_LEASE_MS must be between 1000/,
    );
    expect(() => loadConfig({ BATON_BACKOFF_BASE_MS: '5000', BATON_BACKOFF_MAX_MS: '1000' })).toThrow(
      /BATON_BACKOFF_MAX_MS must be at least BATON_BACKOFF_BASE_MS/,
    );
  });

  it('SQS key pairs: each names a configured API key, ids are unique, errors never show the secret', () => {
    const keys = JSON.stringify([{ name: 'worker', sha256: 'a'.repeat(64), scopes: ['consumer'] }]);
    const pair = {
      access_key_id: 'AKIAWORKER',
      secret_access_key: 'a-secret-of-enough-length',
      api_key: 'worker',
    };
    const config = loadConfig({ BATON_API_KEYS: keys, BATON_SQS_CREDENTIALS: JSON.stringify([pair]) });
    expect(config.sqsCredentials).toEqual([
      { accessKeyId: 'AKIAWORKER', secretAccessKey: 'a-secret-of-enough-length', apiKey: 'worker' },
    ]);
    expect(() =>
      loadConfig({
        BATON_API_KEYS: keys,
        BATON_SQS_CREDENTIALS: JSON.stringify([{ ...pair, api_key: 'nobody' }]),
      }),
    ).toThrow(/pair AKIAWORKER names API key "nobody", which is not configured/);
    expect(() =>
      loadConfig({ BATON_API_KEYS: keys, BATON_SQS_CREDENTIALS: JSON.stringify([pair, pair]) }),
    ).toThrow(/access_key_id "AKIAWORKER" is used twice/);
    let message = '';
    try {
      loadConfig({
        BATON_API_KEYS: keys,
        BATON_SQS_CREDENTIALS: JSON.stringify([{ ...pair, secret_access_key: 'short secret' }]),
      });
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).toMatch(/secret_access_key must be 16-128 printable ASCII characters/);
    expect(message).not.toContain('short secret');
    expect(() => loadConfig({ BATON_SQS_ACCOUNT_ID: '12345' })).toThrow(
      /BATON_SQS_ACCOUNT_ID must be 12 digits/,
    );
    expect(loadConfig({ BATON_SQS_QUEUE_URL: 'https://sqs.example.com/' }).sqsQueueUrl).toBe(
      'https://sqs.example.com',
    );
  });

  it('rejects a malformed boolean', () => {
    expect(() => loadConfig({ BATON_MIGRATE_ON_START: 'maybe' })).toThrow(
      /BATON_MIGRATE_ON_START must be true or false/,
    );
  });

  it('warns when queue-limited keys are configured and /metrics, which names every queue, is open', () => {
    const key = (name: string, queues?: string[]) => ({
      name,
      sha256: 'a'.repeat(64),
      scopes: ['admin'],
      queues,
    });
    const keys = JSON.stringify([key('root'), key('team-a', ['a.*']), key('team-b', ['b.*'])]);
    const warnings = configWarnings(loadConfig({ BATON_API_KEYS: keys }));
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(/^\/metrics answers without a key and shows every queue's name/);
    expect(warnings[0]).toContain('(team-a, team-b)');
    expect(warnings[0]).toContain('set BATON_OPEN_ENDPOINTS=readyz,docs');
    expect(
      configWarnings(loadConfig({ BATON_API_KEYS: keys, BATON_OPEN_ENDPOINTS: 'metrics' }))[0],
    ).toContain('set BATON_OPEN_ENDPOINTS=none');
    // Protected /metrics, or no tenants: nothing to say.
    expect(configWarnings(loadConfig({ BATON_API_KEYS: keys, BATON_OPEN_ENDPOINTS: 'readyz,docs' }))).toEqual(
      [],
    );
    expect(configWarnings(loadConfig({ BATON_API_KEYS: JSON.stringify([key('root')]) }))).toEqual([]);
    expect(configWarnings(loadConfig({}))).toEqual([]);
  });

  it('warns when a non-loopback address is served without keys (BATON_ALLOW_UNAUTHENTICATED)', () => {
    expect(configWarnings(loadConfig({ HOST: '0.0.0.0', BATON_ALLOW_UNAUTHENTICATED: 'true' }))).toEqual([
      'BATON_ALLOW_UNAUTHENTICATED: serving a non-loopback address with no API keys',
    ]);
  });
});
