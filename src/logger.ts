import pino, { type Logger } from 'pino';
import type { Config } from './config.js';

/**
 * Structured JSON logs. Credentials and lease tokens never reach a log line: a lease token is a
 * bearer capability over a job, and an Authorization header is a key.
 */
export function createLogger(config: Pick<Config, 'logLevel'>): Logger {
  return pino({
    level: config.logLevel,
    base: { service: 'baton' },
    timestamp: pino.stdTimeFunctions.isoTime,
    redact: {
      paths: [
        'req.headers.authorization',
        'req.headers["x-api-key"]',
        'headers.authorization',
        'lease_token',
        '*.lease_token',
        'body.lease_token',
        'body.acks[*].lease_token',
      ],
      censor: '[redacted]',
    },
  });
}
