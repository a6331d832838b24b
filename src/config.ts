/**
 * The only reader of `process.env`.
 *
 * Every setting is declared once in `settings` below with its variable name, default, unit and a
 * one-line description. `loadConfig()` parses and validates all of them, reports every bad value at
 * once (each message names its variable), and returns a frozen object of plain values. The README's
 * configuration table is checked against this list by a test, so the two cannot drift.
 *
 * Config imports nothing from the rest of src/ (only the leaf duration-limits.ts), so it is in no
 * import cycle. What only the domain can check (API keys, SQS key pairs, the schedules file) stays
 * here as JSON text or a path; src/startup-inputs.ts reads and checks it at start-up.
 */

import {
  BACKOFF_BASE_MS_MAX,
  BACKOFF_MAX_MS_MAX,
  DAY,
  HOUR,
  LEASE_MS_MAX,
  LEASE_MS_MIN,
  MINUTE,
  RETENTION_MS_MAX,
  SECOND,
  YEAR,
} from './duration-limits.js';

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`Invalid configuration:\n  - ${problems.join('\n  - ')}`);
    this.name = 'ConfigError';
  }
}

type Parser<T> = (raw: string) => T;

interface Setting<T> {
  env: string;
  default: T | undefined;
  unit: string;
  doc: string;
  parse: Parser<T>;
  /** Optional settings have no default: unset means "not given". */
  optional?: true;
}

const integer =
  (min: number, max: number): Parser<number> =>
  (raw) => {
    if (!/^-?\d+$/.test(raw.trim())) throw new Error(`must be an integer, got "${raw}"`);
    const value = Number(raw.trim());
    if (!Number.isSafeInteger(value) || value < min || value > max) {
      throw new Error(`must be between ${min} and ${max}, got ${raw}`);
    }
    return value;
  };

const boolean: Parser<boolean> = (raw) => {
  const value = raw.trim().toLowerCase();
  if (['true', '1', 'yes', 'on'].includes(value)) return true;
  if (['false', '0', 'no', 'off'].includes(value)) return false;
  throw new Error(`must be true or false, got "${raw}"`);
};

const oneOf =
  <T extends string>(...values: T[]): Parser<T> =>
  (raw) => {
    const value = raw.trim() as T;
    if (!values.includes(value)) throw new Error(`must be one of ${values.join(', ')}, got "${raw}"`);
    return value;
  };

const text: Parser<string> = (raw) => {
  if (raw.trim() === '') throw new Error('must not be empty');
  return raw.trim();
};

const postgresUrl: Parser<string> = (raw) => {
  let url: URL;
  try {
    url = new URL(raw.trim());
  } catch {
    throw new Error('must be a URL such as postgres://user:password@host:5432/database');
  }
  if (url.protocol !== 'postgres:' && url.protocol !== 'postgresql:') {
    throw new Error(`must use the postgres:// scheme, got "${url.protocol}"`);
  }
  return raw.trim();
};

/**
 * JSON text (API keys, SQS key pairs) kept as it is, and a file's path, not read here: their rules
 * are the domain's, applied at start-up by src/startup-inputs.ts.
 */
const jsonText: Parser<string> = (raw) => raw;
const filePath: Parser<string> = (raw) => raw.trim();

const pattern =
  (re: RegExp, what: string): Parser<string> =>
  (raw) => {
    if (!re.test(raw.trim())) throw new Error(`must be ${what}, got "${raw}"`);
    return raw.trim();
  };

const httpUrl: Parser<string> = (raw) => {
  let url: URL;
  try {
    url = new URL(raw.trim());
  } catch {
    throw new Error('must be a URL such as https://sqs.example.com');
  }
  if ((url.protocol !== 'http:' && url.protocol !== 'https:') || url.search || url.hash) {
    throw new Error('must be an http(s) URL without query or fragment, such as https://sqs.example.com');
  }
  return url.toString().replace(/\/$/, '');
};

const OPEN_ENDPOINTS = ['readyz', 'metrics', 'docs'] as const;
export type OpenEndpoint = (typeof OPEN_ENDPOINTS)[number];

const endpointList: Parser<OpenEndpoint[]> = (raw) => {
  const items = raw
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  const bad = items.find((i) => !(OPEN_ENDPOINTS as readonly string[]).includes(i) && i !== 'none');
  if (bad)
    throw new Error(`must be a comma-separated list of ${OPEN_ENDPOINTS.join(', ')} (or none), got "${bad}"`);
  return items.filter((i) => i !== 'none') as OpenEndpoint[];
};

function setting<T>(s: Omit<Setting<T>, 'optional'> & { default: T }): Setting<T> {
  return s;
}

function optional<T>(s: Omit<Setting<T>, 'optional' | 'default'>): Setting<T> & { optional: true } {
  return { ...s, default: undefined, optional: true };
}

export type LogLevel = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
export type LogFormat = 'auto' | 'json' | 'pretty';

export const settings = {
  port: setting({
    env: 'PORT',
    default: 8080,
    unit: 'port',
    doc: 'HTTP port to listen on.',
    parse: integer(0, 65535),
  }),
  host: setting({
    env: 'HOST',
    default: '127.0.0.1',
    unit: 'address',
    doc: 'Address to bind. Loopback by default.',
    parse: text,
  }),
  apiKeys: optional<string>({
    env: 'BATON_API_KEYS',
    unit: 'JSON',
    doc: 'API keys as JSON: [{"name", "sha256", "scopes": [producer|consumer|admin], "queues"?: [patterns]}]. See docs/security.md.',
    parse: jsonText,
  }),
  apiKeysFile: optional<string>({
    env: 'BATON_API_KEYS_FILE',
    unit: 'path',
    doc: 'A file holding the same JSON list of API keys (added to BATON_API_KEYS).',
    parse: filePath,
  }),
  allowUnauthenticated: setting({
    env: 'BATON_ALLOW_UNAUTHENTICATED',
    default: false,
    unit: 'boolean',
    doc: 'Allow binding a non-loopback HOST with no API keys (logged as a warning). Off: such a start is refused.',
    parse: boolean,
  }),
  openEndpoints: setting<OpenEndpoint[]>({
    env: 'BATON_OPEN_ENDPOINTS',
    default: ['readyz', 'metrics', 'docs'],
    unit: 'list',
    doc: 'Which of readyz, metrics and docs answer without a key when keys are configured (none: all need one). /healthz is always open. Open metrics shows every queue name: with keys limited to queue patterns, start-up warns about it.',
    parse: endpointList,
  }),
  ui: setting({
    env: 'BATON_UI',
    default: true,
    unit: 'boolean',
    doc: 'Serve the web dashboard at /ui (and send / there). Its files hold no data: it shows what the API answers to the key typed into it. Off: no /ui, and / leads to /docs.',
    parse: boolean,
  }),
  shedEventLoopDelayMs: setting({
    env: 'BATON_SHED_EVENT_LOOP_DELAY_MS',
    default: 1000,
    unit: 'ms',
    doc: 'Load shedding: answer new requests 503 while the event loop lags more than this (0: never).',
    parse: integer(0, MINUTE),
  }),
  shedPoolWaiting: setting({
    env: 'BATON_SHED_POOL_WAITING',
    default: 200,
    unit: 'requests',
    doc: 'Load shedding: answer new requests 503 while more than this many queries wait for a pool connection (0: never).',
    parse: integer(0, 1_000_000),
  }),
  idleMemoryReleaseMs: setting({
    env: 'BATON_IDLE_MEMORY_RELEASE_MS',
    default: MINUTE,
    unit: 'ms',
    doc: 'After this long with the process idle (under 5% of a core), run one memory-reducing GC so the heap grown under load goes back to the system (0: never). Costs a pause of tens of ms when idle, and the next burst of work runs its first seconds on a small heap (more GC).',
    parse: integer(0, HOUR),
  }),
  requestTimeoutMs: setting({
    env: 'BATON_REQUEST_TIMEOUT_MS',
    default: 30 * SECOND,
    unit: 'ms',
    doc: 'How long a client may take to send a whole request, headers and body; a slower one gets 408 and is disconnected. (Long-poll waits are not counted: they come after the request.)',
    parse: integer(SECOND, 10 * MINUTE),
  }),
  keepAliveTimeoutMs: setting({
    env: 'BATON_KEEP_ALIVE_TIMEOUT_MS',
    default: 72 * SECOND,
    unit: 'ms',
    doc: "How long an idle keep-alive connection stays open. Keep it above a load balancer's idle timeout (60 s on most).",
    parse: integer(SECOND, HOUR),
  }),
  maxConnections: setting({
    env: 'BATON_MAX_CONNECTIONS',
    default: 10_000,
    unit: 'connections',
    doc: 'Open client connections at most; further ones are refused until some close. Keep it below the process file-descriptor limit.',
    parse: integer(1, 1_000_000),
  }),
  databaseUrl: optional<string>({
    env: 'DATABASE_URL',
    unit: 'URL',
    doc: 'PostgreSQL connection string. Unset: start an embedded PostgreSQL (see BATON_PGDATA).',
    parse: postgresUrl,
  }),
  listenDatabaseUrl: optional<string>({
    env: 'BATON_LISTEN_DATABASE_URL',
    unit: 'URL',
    doc: 'Where the LISTEN connection goes, when DATABASE_URL is a transaction pooler that cannot hold it. Default: DATABASE_URL.',
    parse: postgresUrl,
  }),
  poolSize: setting({
    env: 'BATON_DB_POOL_SIZE',
    default: 20,
    unit: 'connections',
    doc: 'Maximum connections in the database pool (the LISTEN connection comes on top).',
    parse: integer(2, 1000),
  }),
  preparedStatements: setting({
    env: 'BATON_DB_PREPARED_STATEMENTS',
    default: true,
    unit: 'boolean',
    doc: 'Send statements as named prepared statements (parsed once per connection). Off behind a pooler that cannot keep them (PgBouncer transaction mode before 1.21).',
    parse: boolean,
  }),
  statementTimeoutMs: setting({
    env: 'BATON_STATEMENT_TIMEOUT_MS',
    default: 30 * SECOND,
    unit: 'ms',
    doc: 'statement_timeout and idle_in_transaction_session_timeout of every database session.',
    parse: integer(100, HOUR),
  }),
  connectTimeoutMs: setting({
    env: 'BATON_DB_CONNECT_TIMEOUT_MS',
    default: 5 * SECOND,
    unit: 'ms',
    doc: 'How long a request waits to open or borrow a database connection before a 503.',
    parse: integer(100, MINUTE),
  }),
  logLevel: setting<LogLevel>({
    env: 'LOG_LEVEL',
    default: 'info',
    unit: 'level',
    doc: 'pino log level: fatal, error, warn, info, debug, trace or silent.',
    parse: oneOf('fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'),
  }),
  logFormat: setting<LogFormat>({
    env: 'LOG_FORMAT',
    default: 'auto',
    unit: 'format',
    doc: 'json, pretty (one readable line per event; needs the devDependency pino-pretty, else JSON) or auto: pretty when stdout is a terminal and pino-pretty is installed, else JSON.',
    parse: oneOf('auto', 'json', 'pretty'),
  }),
  bodyLimitBytes: setting({
    env: 'BATON_BODY_LIMIT_BYTES',
    default: 16 * 1024 * 1024,
    unit: 'bytes',
    doc: 'Largest request body accepted (413 above it).',
    parse: integer(1024, 1024 * 1024 * 1024),
  }),
  payloadLimitBytes: setting({
    env: 'BATON_PAYLOAD_LIMIT_BYTES',
    default: 256 * 1024,
    unit: 'bytes',
    doc: 'Largest job payload, measured as its JSON text (413 payload_too_large above it).',
    parse: integer(16, 64 * 1024 * 1024),
  }),
  autoCreateQueues: setting({
    env: 'BATON_AUTO_CREATE_QUEUES',
    default: true,
    unit: 'boolean',
    doc: 'Create a queue on first enqueue. Off: enqueueing to an unknown queue is 404 queue_not_found.',
    parse: boolean,
  }),
  defaultLeaseMs: setting({
    env: 'BATON_DEFAULT_LEASE_MS',
    default: 30 * SECOND,
    unit: 'ms',
    doc: 'Lease length for queues that do not set their own.',
    parse: integer(LEASE_MS_MIN, LEASE_MS_MAX),
  }),
  defaultMaxAttempts: setting({
    env: 'BATON_DEFAULT_MAX_ATTEMPTS',
    default: 5,
    unit: 'attempts',
    doc: 'Claims a job may have before it is dead-lettered, for queues that do not set their own.',
    parse: integer(1, 1000),
  }),
  backoffBaseMs: setting({
    env: 'BATON_BACKOFF_BASE_MS',
    default: SECOND,
    unit: 'ms',
    doc: 'Retry delay after the first failed attempt; doubles with each further attempt.',
    parse: integer(0, BACKOFF_BASE_MS_MAX),
  }),
  backoffMaxMs: setting({
    env: 'BATON_BACKOFF_MAX_MS',
    default: HOUR,
    unit: 'ms',
    doc: 'Cap on the retry delay.',
    parse: integer(0, BACKOFF_MAX_MS_MAX),
  }),
  backoffJitter: setting({
    env: 'BATON_BACKOFF_JITTER',
    default: true,
    unit: 'boolean',
    doc: 'Randomise each retry delay between half and all of its exponential value.',
    parse: boolean,
  }),
  completedRetentionMs: setting({
    env: 'BATON_COMPLETED_RETENTION_MS',
    default: DAY,
    unit: 'ms',
    doc: 'How long completed and cancelled jobs stay visible before the leader prunes them.',
    parse: integer(0, RETENTION_MS_MAX),
  }),
  deadRetentionMs: setting({
    env: 'BATON_DEAD_RETENTION_MS',
    default: 14 * DAY,
    unit: 'ms',
    doc: 'How long dead jobs stay (for inspection and redrive) before the leader prunes them.',
    parse: integer(0, RETENTION_MS_MAX),
  }),
  idempotencyRetentionMs: setting({
    env: 'BATON_IDEMPOTENCY_RETENTION_MS',
    default: DAY,
    unit: 'ms',
    doc: 'How long an idempotency key keeps returning its original job.',
    parse: integer(SECOND, 10 * YEAR),
  }),
  maxAutoQueues: setting({
    env: 'BATON_MAX_AUTO_QUEUES',
    default: 10_000,
    unit: 'queues',
    doc: 'Auto-created queues at most; an enqueue that would create one more is 409 queue_limit_reached (queues created with PUT do not count and are not capped).',
    parse: integer(1, 1_000_000),
  }),
  queueIdleMs: setting({
    env: 'BATON_QUEUE_IDLE_MS',
    default: HOUR,
    unit: 'ms',
    doc: 'Auto-created queues idle this long with no live jobs are removed by the leader.',
    parse: integer(SECOND, 10 * YEAR),
  }),
  vacuumDeadRows: setting({
    env: 'BATON_VACUUM_DEAD_ROWS',
    default: 10_000,
    unit: 'rows',
    doc: 'The leader vacuums the live jobs table when it holds this many dead rows (or a tenth of its live rows, if more), instead of waiting for autovacuum. 0: leave it to autovacuum.',
    parse: integer(0, 1_000_000_000),
  }),
  maintenance: setting({
    env: 'BATON_MAINTENANCE',
    default: true,
    unit: 'boolean',
    doc: 'Take part in leader election and maintenance. Off: this replica only serves the API.',
    parse: boolean,
  }),
  tickMs: setting({
    env: 'BATON_TICK_MS',
    default: 5 * SECOND,
    unit: 'ms',
    doc: 'Maintenance tick: re-arm, prune, key expiry and queue GC run once per tick on the leader.',
    parse: integer(100, 10 * MINUTE),
  }),
  promoteIntervalMs: setting({
    env: 'BATON_PROMOTE_INTERVAL_MS',
    default: 500,
    unit: 'ms',
    doc: 'How often the leader promotes due scheduled jobs to ready.',
    parse: integer(10, MINUTE),
  }),
  ringIntervalMs: setting({
    env: 'BATON_RING_INTERVAL_MS',
    default: 500,
    unit: 'ms',
    doc: 'How often the leader empties the sealed slots of the live-job ring (carry long-running jobs forward, then TRUNCATE).',
    parse: integer(10, MINUTE),
  }),
  ringLockTimeoutMs: setting({
    env: 'BATON_RING_LOCK_TIMEOUT_MS',
    default: 50,
    unit: 'ms',
    doc: 'lock_timeout of a ring truncation: the longest a claim waits behind it. A truncation that would wait longer rolls back and is tried again next pass.',
    parse: integer(1, MINUTE),
  }),
  scheduleIntervalMs: setting({
    env: 'BATON_SCHEDULE_INTERVAL_MS',
    default: 500,
    unit: 'ms',
    doc: 'Longest the leader waits between looks for due cron schedules (it also wakes at the next occurrence, so occurrences are usually enqueued within milliseconds).',
    parse: integer(10, MINUTE),
  }),
  scheduleGraceMs: setting({
    env: 'BATON_SCHEDULE_GRACE_MS',
    default: MINUTE,
    unit: 'ms',
    doc: 'A schedule occurrence the leader reaches later than this (after downtime) counts as missed for catch_up none; catch_up latest and all still enqueue it.',
    parse: integer(0, DAY),
  }),
  scheduleMinIntervalMs: setting({
    env: 'BATON_SCHEDULE_MIN_INTERVAL_MS',
    default: SECOND,
    unit: 'ms',
    doc: 'A cron whose occurrences come closer together than this is refused (400 naming cron; in BATON_SCHEDULES_FILE, a start-up error). A cron cannot say less than a second, so the default refuses none: 60000 refuses every six-field cron that fires more than once a minute.',
    parse: integer(0, DAY),
  }),
  maxSchedules: setting({
    env: 'BATON_MAX_SCHEDULES',
    default: 10_000,
    unit: 'schedules',
    doc: 'Cron schedules at most, those of BATON_SCHEDULES_FILE included; a PUT that would create one more is 409 schedule_limit_reached (replacing one is never refused).',
    parse: integer(1, 1_000_000),
  }),
  maxSchedulesPerKey: setting({
    env: 'BATON_MAX_SCHEDULES_PER_KEY',
    default: 1000,
    unit: 'schedules',
    doc: 'For an API key limited to queue patterns (a tenant): schedules on the queues it may use at most; its PUT that would create one more is 409 schedule_limit_reached. Keys without queue limits are held by BATON_MAX_SCHEDULES alone.',
    parse: integer(1, 1_000_000),
  }),
  schedulesFile: optional<string>({
    env: 'BATON_SCHEDULES_FILE',
    unit: 'path',
    doc: 'A JSON or YAML file of cron schedules ({"schedules": {name: {queue, cron, ...}}}), applied at every start; schedules changed through the API since are reported as drifted, not overwritten. See README, "Cron schedules".',
    parse: filePath,
  }),
  pruneLockTimeoutMs: setting({
    env: 'BATON_PRUNE_LOCK_TIMEOUT_MS',
    default: 50,
    unit: 'ms',
    doc: 'lock_timeout of a prune attempt; a prune that would wait longer rolls back and backs off.',
    parse: integer(1, MINUTE),
  }),
  pollIntervalMs: setting({
    env: 'BATON_POLL_INTERVAL_MS',
    default: SECOND,
    unit: 'ms',
    doc: 'Long-poll fallback: a waiting claim re-checks the database this often even without a wake-up.',
    parse: integer(10, MINUTE),
  }),
  metricsMaxQueues: setting({
    env: 'BATON_METRICS_MAX_QUEUES',
    default: 200,
    unit: 'queues',
    doc: 'Distinct queue labels in /metrics; further queues are counted under queue="_other".',
    parse: integer(1, 100_000),
  }),
  migrateOnStart: setting({
    env: 'BATON_MIGRATE_ON_START',
    default: true,
    unit: 'boolean',
    doc: 'Apply pending migrations at start-up (safe with many replicas starting at once).',
    parse: boolean,
  }),
  shutdownTimeoutMs: setting({
    env: 'BATON_SHUTDOWN_TIMEOUT_MS',
    default: 10 * SECOND,
    unit: 'ms',
    doc: 'On SIGTERM, how long in-flight requests may take to finish before the process exits anyway.',
    parse: integer(0, 10 * MINUTE),
  }),
  pgdata: setting({
    env: 'BATON_PGDATA',
    default: './.baton/pgdata',
    unit: 'path',
    doc: 'Data folder of the embedded PostgreSQL (only used when DATABASE_URL is unset).',
    parse: text,
  }),
  embeddedPgPort: setting({
    env: 'BATON_EMBEDDED_PG_PORT',
    default: 54329,
    unit: 'port',
    doc: 'Port of the embedded PostgreSQL (loopback only).',
    parse: integer(1, 65535),
  }),
  sqs: setting({
    env: 'BATON_SQS',
    default: true,
    unit: 'boolean',
    doc: 'Serve the SQS-compatible endpoint on the same port (POST / and POST /{account}/{queue}; AWS JSON 1.0 and query protocols). See docs/sqs.md.',
    parse: boolean,
  }),
  sqsRegion: setting({
    env: 'BATON_SQS_REGION',
    default: 'us-east-1',
    unit: 'region',
    doc: 'AWS region named in queue ARNs (requests signed for any region are accepted).',
    parse: pattern(/^[a-z0-9-]{1,32}$/, 'a region name such as us-east-1'),
  }),
  sqsAccountId: setting({
    env: 'BATON_SQS_ACCOUNT_ID',
    default: '000000000000',
    unit: 'account',
    doc: 'The 12-digit account id in queue URLs and ARNs.',
    parse: pattern(/^\d{12}$/, '12 digits'),
  }),
  sqsCredentials: optional<string>({
    env: 'BATON_SQS_CREDENTIALS',
    unit: 'JSON',
    doc: 'Signature V4 key pairs for the SQS endpoint: [{"access_key_id", "secret_access_key", "api_key": <name of an API key>}]; a request signed with a pair gets that API key\'s scopes and queue patterns.',
    parse: jsonText,
  }),
  sqsCredentialsFile: optional<string>({
    env: 'BATON_SQS_CREDENTIALS_FILE',
    unit: 'path',
    doc: 'A file holding the same JSON list of SQS key pairs (added to BATON_SQS_CREDENTIALS).',
    parse: filePath,
  }),
  sqsQueueUrl: optional<string>({
    env: 'BATON_SQS_QUEUE_URL',
    unit: 'URL',
    doc: 'Base of the queue URLs the SQS endpoint hands out (https://sqs.example.com), for clients that reach Baton through a proxy. Unset: the scheme and Host of each request.',
    parse: httpUrl,
  }),
};

type Settings = typeof settings;
type ValueOf<S> = S extends { parse: Parser<infer T> } ? T : never;

export type Config = {
  readonly [K in keyof Settings]: Settings[K] extends { optional: true }
    ? ValueOf<Settings[K]> | undefined
    : ValueOf<Settings[K]>;
};

/**
 * Parse the environment into a frozen Config. Throws ConfigError naming every bad variable.
 * `env` defaults to the process environment; tests pass their own object.
 */
export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  const problems: string[] = [];
  const out: Record<string, unknown> = {};
  for (const [key, s] of Object.entries(settings) as [string, Setting<unknown>][]) {
    const raw = env[s.env];
    if (raw === undefined || raw === '') {
      out[key] = s.default;
      continue;
    }
    try {
      out[key] = s.parse(raw);
    } catch (err) {
      problems.push(`${s.env} ${(err as Error).message}`);
    }
  }
  // The rule queues/queue-settings.ts's backoffProblem applies to a queue's own values.
  if (problems.length === 0 && (out.backoffMaxMs as number) < (out.backoffBaseMs as number)) {
    problems.push('BATON_BACKOFF_MAX_MS must be at least BATON_BACKOFF_BASE_MS');
  }
  if (problems.length > 0) throw new ConfigError(problems);
  return Object.freeze(out) as Config;
}
