import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../src/config.js';

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

  it('keeps what only the domain can check as it was given: JSON text and paths (see startup-inputs.ts)', () => {
    const config = loadConfig({
      BATON_API_KEYS: 'not json',
      BATON_API_KEYS_FILE: ' /keys.json ',
      BATON_SQS_CREDENTIALS: '[{"access_key_id": 1}]',
      BATON_SQS_CREDENTIALS_FILE: '/pairs.json',
      BATON_SCHEDULES_FILE: '/nonexistent/schedules.yaml',
    });
    expect(config.apiKeys).toBe('not json');
    expect(config.apiKeysFile).toBe('/keys.json');
    expect(config.sqsCredentials).toBe('[{"access_key_id": 1}]');
    expect(config.sqsCredentialsFile).toBe('/pairs.json');
    expect(config.schedulesFile).toBe('/nonexistent/schedules.yaml');
    expect(loadConfig({}).apiKeys).toBeUndefined();
  });

  it("checks the SQS endpoint's account id and queue URL", () => {
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
});
