import { createRequire } from 'node:module';
import pino, { type DestinationStream, type Logger } from 'pino';
import type PinoPretty from 'pino-pretty';
import type { Config } from './config.js';

/**
 * What the modules below the app need of a logger (pino's Logger is one); tests pass small objects.
 */
export interface Log {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

type LoggerConfig = Pick<Config, 'logLevel'> & Partial<Pick<Config, 'logFormat'>>;

/**
 * Structured JSON logs. Credentials and lease tokens never reach a log line: a lease token is a
 * bearer capability over a job, and an Authorization header is a key.
 *
 * A person at a terminal gets one readable line per event instead (LOG_FORMAT=auto), through
 * pino-pretty. It is a devDependency, so a production install does not have it and logs JSON: the
 * service never depends on it. `destination` is for tests; the default is stdout.
 */
export function createLogger(config: LoggerConfig, destination?: DestinationStream): Logger {
  const format = config.logFormat ?? 'auto';
  const terminal = destination ? false : process.stdout.isTTY === true;
  const pretty = format === 'pretty' || (format === 'auto' && terminal) ? loadPinoPretty() : undefined;
  const options: pino.LoggerOptions = {
    level: config.logLevel,
    base: { service: 'baton' },
    timestamp: pino.stdTimeFunctions.isoTime,
    serializers: { err: briefError },
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
  };
  if (!pretty) {
    const log = destination ? pino(options, destination) : pino(options);
    if (format === 'pretty') log.warn('LOG_FORMAT=pretty needs pino-pretty (a devDependency); logging JSON');
    return log;
  }
  const stream = pretty({
    colorize: terminal,
    // Synchronous, so the last lines before process.exit() are not lost.
    sync: true,
    singleLine: true,
    translateTime: 'SYS:HH:MM:ss.l',
    ignore: 'service,pid,hostname',
    messageFormat: (line, messageKey) => {
      const { req, res, responseTime } = line as RequestLine;
      const msg = String(line[messageKey] ?? '');
      return req && res ? `${msg}: ${req.method} ${req.url} ${res.statusCode} in ${responseTime} ms` : msg;
    },
    destination: destination ?? 1,
  });
  return pino(options, stream);
}

interface RequestLine {
  req?: { method: string; url: string };
  res?: { statusCode: number };
  responseTime?: number;
}

function loadPinoPretty(): typeof PinoPretty | undefined {
  try {
    return createRequire(import.meta.url)('pino-pretty') as typeof PinoPretty;
  } catch {
    return undefined;
  }
}

/** A Log that drops everything (for tools and tests that have no use for the lines). */
export const noLog: Log = { info() {}, warn() {}, error() {} };

/**
 * An error as a log line carries it: pino's own serializer, without the objects libraries hang on
 * errors (node-postgres puts the whole client on a connection error: 11 KB a line, with its
 * configuration). Plain values stay (code, severity, routine, ...), and the stack.
 */
function briefError(err: unknown): unknown {
  const serialized = pino.stdSerializers.err(err as Error) as unknown as Record<string, unknown>;
  if (!serialized || typeof serialized !== 'object') return serialized;
  const kept: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(serialized)) {
    if (value === null || typeof value !== 'object' || key === 'cause') kept[key] = value;
  }
  return kept;
}
