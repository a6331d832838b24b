import { invalidField } from '../errors.js';
import type { OnConflict } from '../jobs/enqueue/enqueue.js';
import {
  DOT_SEGMENT_MESSAGE,
  isDotSegment,
  isGroupName,
  isPrintable,
  isQueueName,
  MAX_ATTEMPTS_LIMIT,
  MAX_DELAY_MS,
  PRIORITY_MAX,
  PRIORITY_MIN,
  TIMEOUT_MS_MAX,
  TIMEOUT_MS_MIN,
  UNIQUE_KEY_MAX,
} from '../jobs/limits.js';
import { checkCron } from './cron.js';
import type { CatchUp, Overlap } from './occurrences.js';

/**
 * What a schedule is: everything PUT /v1/schedules/{name} and the schedules file set. A PUT sets the
 * whole definition; a field left out takes its default (so a PUT without `paused` resumes).
 */
export interface ScheduleDefinition {
  queue: string;
  cron: string;
  timezone: string;
  /** The payload as JSON text (exact numbers kept), given to every job. */
  payloadJson: string;
  priority: number;
  /** null: the queue's setting when the job is enqueued. */
  maxAttempts: number | null;
  /** The job fields below: null for none (each job then has none, or the queue's setting). */
  group: string | null;
  /** Budget of one attempt (null: the queue's). */
  timeoutMs: number | null;
  /** Each job expires this long after it is enqueued (a fixed time would not recur). */
  expiresInMs: number | null;
  /** At most one waiting job per queue and key: an occurrence whose key a waiting job holds folds into it. */
  uniqueKey: string | null;
  /** Set exactly when uniqueKey is (keep by default). */
  onConflict: OnConflict | null;
  overlap: Overlap;
  catchUp: CatchUp;
  paused: boolean;
}

export const SCHEDULE_NAME_PATTERN = '^[A-Za-z0-9._-]{1,128}$';
const SCHEDULE_NAME = new RegExp(SCHEDULE_NAME_PATTERN);
export const isScheduleName = (name: string) => SCHEDULE_NAME.test(name);

export const OVERLAPS: readonly Overlap[] = ['allow', 'skip'];
export const CATCH_UPS: readonly CatchUp[] = ['none', 'latest', 'all'];
export const DEFAULTS = {
  timezone: 'UTC',
  priority: 0,
  overlap: 'allow',
  catchUp: 'latest',
  paused: false,
} as const;

/**
 * Refuse a cron or time zone that cannot be scheduled, or a cron that fires more often than
 * `minIntervalMs` allows (400 naming the field), given the database's now.
 */
export function checkTiming(
  def: Pick<ScheduleDefinition, 'cron' | 'timezone'>,
  now: Date,
  minIntervalMs: number,
): void {
  const problem = checkCron(def.cron, def.timezone, now, minIntervalMs);
  if (problem) throw invalidField(problem.field, problem.message);
}

export const ON_CONFLICTS: readonly OnConflict[] = ['keep', 'replace'];

/** The job fields of a definition as the PUT body and a file entry give them (snake_case). */
export interface JobFieldsInput {
  group?: string | null;
  timeout_ms?: number | null;
  expires_in_ms?: number | null;
  unique_key?: string | null;
  on_conflict?: OnConflict | null;
}

type JobFields = Pick<ScheduleDefinition, 'group' | 'timeoutMs' | 'expiresInMs' | 'uniqueKey' | 'onConflict'>;

/**
 * The job fields of a definition, each already of its type and range (the PUT body's schema, or
 * parseDefinition), with the one rule across fields: on_conflict only with unique_key. `fail`
 * reports a field (a 400 for the API, a start-up error for the file).
 */
export function jobFieldsOf(
  input: JobFieldsInput,
  fail: (field: string, message: string) => never,
): JobFields {
  const uniqueKey = input.unique_key ?? null;
  if (input.on_conflict != null && uniqueKey === null) fail('on_conflict', 'needs unique_key');
  return {
    group: input.group ?? null,
    timeoutMs: input.timeout_ms ?? null,
    expiresInMs: input.expires_in_ms ?? null,
    uniqueKey,
    onConflict: uniqueKey === null ? null : (input.on_conflict ?? 'keep'),
  };
}

const FIELDS = [
  'queue',
  'cron',
  'timezone',
  'payload',
  'priority',
  'max_attempts',
  'group',
  'timeout_ms',
  'expires_in_ms',
  'unique_key',
  'on_conflict',
  'overlap',
  'catch_up',
  'paused',
] as const;

/**
 * A definition from untyped input (an entry of the schedules file), with the same rules as the PUT
 * body's schema; errors name the field under `at` ("schedules.nightly.cron ..."). Cron and time zone
 * are checked later against the database's clock (checkTiming).
 */
export function parseDefinition(raw: unknown, at: string): ScheduleDefinition {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw))
    throw new Error(`${at} must be a mapping`);
  const input = raw as Record<string, unknown>;
  const unknown = Object.keys(input).find((k) => !(FIELDS as readonly string[]).includes(k));
  if (unknown !== undefined) throw new Error(`${at}.${unknown} is not a known field`);
  const fail = (field: string, message: string): never => {
    throw new Error(`${at}.${field} ${message}`);
  };
  const { queue, cron, timezone, payload, priority, max_attempts, overlap, catch_up, paused } = input;
  if (typeof queue !== 'string' || !isQueueName(queue))
    fail('queue', 'must be a queue name: 1-128 letters, digits, ".", "_" or "-"');
  if (isDotSegment(queue as string)) fail('queue', DOT_SEGMENT_MESSAGE);
  if (typeof cron !== 'string' || cron.trim() === '') fail('cron', 'must be a cron expression');
  if (timezone !== undefined && typeof timezone !== 'string') fail('timezone', 'must be a time zone name');
  const int = (v: unknown, min: number, max: number) =>
    Number.isInteger(v) && (v as number) >= min && (v as number) <= max;
  if (priority !== undefined && !int(priority, PRIORITY_MIN, PRIORITY_MAX))
    fail('priority', `must be an integer from ${PRIORITY_MIN} to ${PRIORITY_MAX}`);
  if (max_attempts !== undefined && max_attempts !== null && !int(max_attempts, 1, MAX_ATTEMPTS_LIMIT))
    fail('max_attempts', `must be an integer from 1 to ${MAX_ATTEMPTS_LIMIT}, or null`);
  const { group, timeout_ms, expires_in_ms, unique_key, on_conflict } = input;
  const absent = (v: unknown) => v === undefined || v === null;
  if (!absent(group) && !(typeof group === 'string' && isGroupName(group)))
    fail('group', 'must be a group name: 1-128 printable ASCII characters without spaces, or null');
  if (typeof group === 'string' && isDotSegment(group)) fail('group', DOT_SEGMENT_MESSAGE);
  if (!absent(timeout_ms) && !int(timeout_ms, TIMEOUT_MS_MIN, TIMEOUT_MS_MAX))
    fail('timeout_ms', `must be an integer from ${TIMEOUT_MS_MIN} to ${TIMEOUT_MS_MAX}, or null`);
  // At least 1, as in the PUT body: 0 would expire every job as it is enqueued.
  if (!absent(expires_in_ms) && !int(expires_in_ms, 1, MAX_DELAY_MS))
    fail('expires_in_ms', `must be an integer from 1 to ${MAX_DELAY_MS}, or null`);
  if (
    !absent(unique_key) &&
    !(
      typeof unique_key === 'string' &&
      [...unique_key].length >= 1 &&
      [...unique_key].length <= UNIQUE_KEY_MAX &&
      isPrintable(unique_key)
    )
  )
    fail('unique_key', `must be 1-${UNIQUE_KEY_MAX} printable characters, or null`);
  if (!absent(on_conflict) && !ON_CONFLICTS.includes(on_conflict as OnConflict))
    fail('on_conflict', `must be one of ${ON_CONFLICTS.join(', ')}, or null`);
  if (overlap !== undefined && !OVERLAPS.includes(overlap as Overlap))
    fail('overlap', `must be one of ${OVERLAPS.join(', ')}`);
  if (catch_up !== undefined && !CATCH_UPS.includes(catch_up as CatchUp))
    fail('catch_up', `must be one of ${CATCH_UPS.join(', ')}`);
  if (paused !== undefined && typeof paused !== 'boolean') fail('paused', 'must be true or false');
  return {
    queue: queue as string,
    cron: cron as string,
    timezone: (timezone as string | undefined) ?? DEFAULTS.timezone,
    payloadJson: JSON.stringify(payload ?? null),
    priority: (priority as number | undefined) ?? DEFAULTS.priority,
    maxAttempts: (max_attempts as number | null | undefined) ?? null,
    ...jobFieldsOf(input as JobFieldsInput, fail),
    overlap: (overlap as Overlap | undefined) ?? DEFAULTS.overlap,
    catchUp: (catch_up as CatchUp | undefined) ?? DEFAULTS.catchUp,
    paused: (paused as boolean | undefined) ?? DEFAULTS.paused,
  };
}
