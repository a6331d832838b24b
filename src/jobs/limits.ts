/**
 * Limits of the public API, in one place: request schemas, validation messages and docs read them.
 * Every bound here is also one PostgreSQL accepts, so a value the API takes can always be stored.
 */
import { DAY, SECOND, YEAR } from '../duration-limits.js';

/** The lease, backoff and retention bounds, which config's server defaults obey too. */
export {
  BACKOFF_BASE_MS_MAX,
  BACKOFF_MAX_MS_MAX,
  LEASE_MS_MAX,
  LEASE_MS_MIN,
  RETENTION_MS_MAX,
} from '../duration-limits.js';

export const QUEUE_NAME_PATTERN = '^[A-Za-z0-9._-]{1,128}$';
export const QUEUE_NAME_MAX = 128;
const QUEUE_NAME = new RegExp(QUEUE_NAME_PATTERN);
export const isQueueName = (name: string): boolean => QUEUE_NAME.test(name);

/**
 * A job's group (flow control): a tenant, a customer, an API key. Wider than a queue name so that
 * tenant ids fit as they are ("customer:42", "ops@example.com", "org/team"): printable ASCII without
 * spaces, which is also what SQS allows in a MessageGroupId, so an SQS message group is a Baton
 * group as it is. In a URL path (/v1/queues/{queue}/groups/{group}) it is percent-encoded.
 */
export const GROUP_NAME_PATTERN = '^[!-~]{1,128}$';
export const GROUP_NAME_MAX = 128;
const GROUP_NAME = new RegExp(GROUP_NAME_PATTERN);
export const isGroupName = (name: string): boolean => GROUP_NAME.test(name);

/**
 * "." and "..": names a URL cannot carry. Browsers, fetch, curl and most HTTP clients remove such a
 * path segment (also written %2e%2e) before sending, so a request about group ".." of queue "q"
 * would reach /v1/queues/q/ and act on the queue. Queue, group and schedule names are refused these
 * two values wherever a name is created (the API's bodies and paths, SQS CreateQueue and
 * MessageGroupId, the schedules file); rows made before the rule stay readable and removable by a
 * client that sends its path as is (`curl --path-as-is`). Every other name of the patterns above
 * travels unchanged once percent-encoded.
 */
export const DOT_SEGMENTS: readonly string[] = ['.', '..'];
export const isDotSegment = (name: string): boolean => name === '.' || name === '..';
export const DOT_SEGMENT_MESSAGE =
  'must not be "." or "..": HTTP clients remove such a segment from a URL, so nothing could name it';

/** Flow-control limits (queue settings and group overrides). */
export const CONCURRENCY_LIMIT_MAX = 100_000;
export const RATE_LIMIT_MAX = 1_000_000;
export const RATE_PERIOD_MS_MIN = 100;
export const RATE_PERIOD_MS_MAX = DAY;
export const GROUP_WEIGHT_MAX = 1000;

/**
 * A job id, canonical: a decimal number without leading zeros, at most 18 digits. Ids come from a
 * bigint sequence, which would take tens of thousands of years at a million jobs a second to reach 19
 * digits; refusing "03" and "0000000000000000003" means one job has exactly one spelling, so an
 * authorization check, a duplicate check and the SQL that casts the text to bigint all see the same
 * job.
 */
export const JOB_ID_PATTERN = '^[1-9][0-9]{0,17}$';
const JOB_ID = new RegExp(JOB_ID_PATTERN);
export const isJobId = (id: string): boolean => JOB_ID.test(id);

/**
 * A lease token as claims mint it (PostgreSQL's gen_random_uuid()): 8-4-4-4-12 hex digits. Written
 * out rather than left to a `uuid` format, which also takes forms (`urn:uuid:...`) that the
 * database's uuid type refuses.
 */
export const LEASE_TOKEN_PATTERN =
  '^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$';

/**
 * Printable text: no control characters (PostgreSQL text cannot hold NUL at all) and no unpaired
 * UTF-16 surrogates (not Unicode; PostgreSQL refuses them in JSON). With the `u` flag a paired
 * surrogate is one code point outside the range, so only unpaired ones match.
 */
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point.
const PRINTABLE = /^[^\u0000-\u001f\u007f\ud800-\udfff]*$/u;
export const isPrintable = (text: string): boolean => PRINTABLE.test(text);
/** The name of that rule as a string format, in request schemas and the API document. */
export const PRINTABLE_FORMAT = 'printable';
/**
 * The control-character half of the rule as a pattern that every regex dialect reads alike (`\x`
 * escapes only): the API document's pattern for printable text, checked by generated clients too.
 * The surrogate half cannot be written portably (`\ud800` is not Go's or Rust's syntax, a range of
 * surrogates means something else without JavaScript's `u` flag, and @hey-api/openapi-ts 0.99 turns
 * `\uXXXX` into raw characters), so it lives in the format, which clients may ignore.
 */
export const PRINTABLE_PATTERN = '^[^\\x00-\\x1f\\x7f]*$';

/**
 * The budget of one attempt (a job's timeout_ms, a queue's default): a second to a week. The upper
 * bound is the CHECK on baton.queues.timeout_ms (migrations/0009_time_limits.ts).
 */
export const TIMEOUT_MS_MIN = SECOND;
export const TIMEOUT_MS_MAX = 7 * DAY;

/** Rows per page of a list (queues, jobs). */
export const LIST_LIMIT_MAX = 500;
/** Queue history is kept a day: GET /v1/queues/{queue}/history goes back at most this many minutes. */
export const HISTORY_MINUTES_MAX = 24 * 60;

/** Jobs per batch enqueue, claim or batch ack. */
export const MAX_BATCH = 1000;

/** Most jobs one bulk action over a list's matches acts on (POST /v1/jobs/bulk with `match`). */
export const BULK_MATCH_MAX = 10_000;

export const MAX_WAIT_MS = 20_000;
/**
 * Longest wait for jobs to finish (GET /v1/jobs/{id}?wait_ms, POST /v1/jobs/await): a minute, under
 * the idle timeouts of common proxies and load balancers (60 s), so a waiting client is answered
 * before something between it and Baton drops the connection.
 */
export const MAX_AWAIT_MS = 60_000;
/** Ids per POST /v1/jobs/await. */
export const MAX_AWAIT_IDS = 1000;
/** A job's progress report (renew's `progress`), as JSON text: small, since every renewal may carry it. */
export const PROGRESS_MAX_BYTES = 4096;
/** Longest delay or retry a job may be given: ten years. */
export const MAX_DELAY_MS = 10 * YEAR;
export const PRIORITY_MIN = -2_147_483_648;
export const PRIORITY_MAX = 2_147_483_647;
export const MAX_ATTEMPTS_LIMIT = 1000;
/** Parents one job may name in `depends_on` (a 1,000-way fan-in is one child of 1,000 parents). */
export const MAX_PARENTS = 1000;
/** Dependencies (edges) one enqueue request may name in all: a batch of 1,000 jobs of 10 parents each. */
export const MAX_EDGES_PER_REQUEST = 10_000;
/** Parents per page of GET /v1/jobs/{id}/parents (each with its result) and of a job's children. */
export const PARENTS_PAGE_MAX = 100;
/** Jobs in one read of a workflow graph (GET /v1/jobs/{id}/graph; the dashboard draws them all). */
export const GRAPH_MAX_JOBS = 100;
/** How much of a payload's JSON a list shows when it leaves payloads out (`payload_preview`). */
export const PAYLOAD_PREVIEW_CHARS = 120;
/** A push delivery's timeout (docs/push.md): 100 ms to 15 minutes. */
export const PUSH_TIMEOUT_MS_MIN = 100;
export const PUSH_TIMEOUT_MS_MAX = 900_000;
/** Push deliveries in flight per queue and replica, at most. */
export const PUSH_CONCURRENCY_MAX = 1000;
export const IDEMPOTENCY_KEY_MAX = 255;
export const UNIQUE_KEY_MAX = 255;
export const WORKER_ID_MAX = 128;
export const ERROR_MESSAGE_MAX = 4096;
/** Failed attempts kept in a job's error history (older ones are dropped). */
export const ERRORS_KEPT = 20;
