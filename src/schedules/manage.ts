import { sql, type Transaction } from 'kysely';
import type { Db } from '../db/database.js';
import type { Database } from '../db/schema.js';
import { DomainError, queueNotFound } from '../errors.js';
import { type EnqueueOptions, type EnqueueResult, enqueueInTransaction } from '../jobs/enqueue/enqueue.js';
import { holdQueue } from '../queues/queue-store.js';
import { cronPlan } from './cron.js';
import { checkTiming, type ScheduleDefinition } from './definition.js';
import { jobOfSchedule } from './fire.js';
import {
  countSchedules,
  databaseNow,
  lockedOutOfScope,
  lockSchedule,
  lockScheduleCreation,
  recordTrigger,
  type ScheduleRow,
  setSchedulePaused,
  writeSchedule,
} from './store.js';

/** What the API does to schedules: create or replace, pause, resume, trigger. */

export const scheduleNotFound = (name: string) =>
  new DomainError('not_found', `schedule "${name}" does not exist`);

const scheduleOutOfScope = (name: string) =>
  new DomainError(
    'forbidden',
    `may not change schedule "${name}": it enqueues into a queue this key may not use`,
  );

/**
 * The next occurrence a schedule should wait for after it is written at `now`. Unchanged timing
 * keeps the pending occurrence, even one already due that the leader has not reached yet (a PUT
 * that only edits the payload must not make it skip a run). New timing, or a resume, starts after
 * now, and never at or before the last occurrence already enqueued (a writer whose now() is a
 * moment older than the leader's could otherwise hand that occurrence out again).
 */
export function nextRunFor(
  existing: ScheduleRow | undefined,
  def: ScheduleDefinition,
  now: Date,
): Date | null {
  if (
    existing?.next_run_at &&
    !existing.paused &&
    !def.paused &&
    existing.cron === def.cron &&
    existing.timezone === def.timezone
  ) {
    return existing.next_run_at;
  }
  const last = existing?.last_run_at;
  const from = last && last > now ? last : now;
  return cronPlan(def.cron, def.timezone).nextAfter(from) ?? null;
}

/**
 * Write a definition inside the caller's transaction (with the row locked by it, if it exists). A cron
 * whose occurrences come closer than `minIntervalMs` is refused like a bad one.
 */
export async function writeDefinition(
  trx: Transaction<Database>,
  name: string,
  def: ScheduleDefinition,
  existing: ScheduleRow | undefined,
  now: Date,
  minIntervalMs: number,
): Promise<{ created: boolean }> {
  checkTiming(def, now, minIntervalMs);
  return writeSchedule(trx, name, def, nextRunFor(existing, def, now));
}

/**
 * What the server allows of schedules made through the API (config.ts): the closest two occurrences
 * may come, how many schedules there may be, and how many a key limited to queue patterns (a tenant)
 * may have among the queues it may use.
 */
export interface ScheduleLimits {
  minIntervalMs: number;
  maxSchedules: number;
  maxSchedulesPerKey: number;
}

const scheduleLimitReached = (detail: string) =>
  new DomainError(
    'schedule_limit_reached',
    `${detail}: delete one (DELETE /v1/schedules/{name}) or replace one (PUT over its name)`,
  );

/**
 * Refuse a new schedule beyond the caps (409 schedule_limit_reached). `keyPatterns`: the queue
 * patterns of the key making it, when it is limited to some. Replacing a schedule is never refused.
 */
async function checkRoom(trx: Transaction<Database>, limits: ScheduleLimits, keyPatterns?: string[]) {
  if ((await countSchedules(trx)) >= limits.maxSchedules) {
    throw scheduleLimitReached(
      `this server already has ${limits.maxSchedules} schedules (BATON_MAX_SCHEDULES)`,
    );
  }
  if (keyPatterns && (await countSchedules(trx, keyPatterns)) >= limits.maxSchedulesPerKey) {
    throw scheduleLimitReached(
      `the queues this API key may use already have ${limits.maxSchedulesPerKey} schedules ` +
        '(BATON_MAX_SCHEDULES_PER_KEY)',
    );
  }
}

/**
 * PUT: create (created: true) or replace a schedule. With auto-create off its queue must exist
 * (404 queue_not_found now, rather than a failed occurrence later). A new schedule must fit under
 * the caps; creations wait for each other on one lock so that concurrent ones cannot overshoot.
 */
export async function putSchedule(
  db: Db,
  name: string,
  def: ScheduleDefinition,
  opts: { autoCreateQueues: boolean; limits: ScheduleLimits; keyPatterns?: string[] },
): Promise<{ created: boolean }> {
  return db.transaction().execute(async (trx) => {
    const now = await databaseNow(trx);
    // A bad definition is a 400 before any cap is looked at.
    checkTiming(def, now, opts.limits.minIntervalMs);
    if (!opts.autoCreateQueues && !(await holdQueue(trx, def.queue))) {
      throw queueNotFound(def.queue, ' and auto-create is off (BATON_AUTO_CREATE_QUEUES)');
    }
    // A queue-limited key may not take over another tenant's schedule by its name, even one whose
    // queue changed after auth looked (the row stays locked until this writes).
    if (opts.keyPatterns && (await lockedOutOfScope(trx, name, opts.keyPatterns))) {
      throw scheduleOutOfScope(name);
    }
    let existing = await lockSchedule(trx, name);
    if (!existing) {
      await lockScheduleCreation(trx);
      // A PUT of the same name may have created it while this one waited: then this one replaces it.
      existing = await lockSchedule(trx, name);
      if (!existing) await checkRoom(trx, opts.limits, opts.keyPatterns);
    }
    return writeSchedule(trx, name, def, nextRunFor(existing, def, now));
  });
}

/** Pause or resume; a resumed schedule does not catch up on the time it was paused. */
export async function pauseSchedule(
  db: Db,
  name: string,
  paused: boolean,
  patterns?: string[],
): Promise<void> {
  await db.transaction().execute(async (trx) => {
    const now = await databaseNow(trx);
    const row = await lockSchedule(trx, name, patterns);
    if (!row) throw scheduleNotFound(name);
    if (row.paused === paused) return;
    const next = paused ? row.next_run_at : nextRunFor(row, { ...definitionOfRow(row), paused }, now);
    await setSchedulePaused(trx, name, paused, next);
  });
}

/**
 * Run a schedule now, once (paused or not, whatever its overlap rule: an operator asked). The job
 * and the schedule's last_job_id commit together, so overlap: skip then waits for this job too.
 */
export async function triggerSchedule(
  db: Db,
  name: string,
  opts: EnqueueOptions,
  patterns?: string[],
): Promise<{ schedule: ScheduleRow; result: EnqueueResult }> {
  return db.transaction().execute(async (trx) => {
    const now = await databaseNow(trx);
    const row = await lockSchedule(trx, name, patterns);
    if (!row) throw scheduleNotFound(name);
    const [result] = await enqueueInTransaction(trx, row.queue, [jobOfSchedule(row)], opts);
    await recordTrigger(trx, name, now, result!.job.id);
    return { schedule: row, result: result! };
  });
}

export function definitionOfRow(row: ScheduleRow): ScheduleDefinition {
  return {
    queue: row.queue,
    cron: row.cron,
    timezone: row.timezone,
    payloadJson: row.payload_json,
    priority: row.priority,
    maxAttempts: row.max_attempts,
    group: row.group_key,
    timeoutMs: row.timeout_ms,
    expiresInMs: row.expires_in_ms,
    uniqueKey: row.unique_key,
    onConflict: row.on_conflict,
    overlap: row.overlap,
    catchUp: row.catch_up,
    paused: row.paused,
  };
}

/** Locks all schedule writers of the file's start-up pass against each other (an arbitrary constant). */
export const SCHEDULES_FILE_LOCK = 0x62746e5343;
export const lockForFile = (trx: Transaction<Database>) =>
  sql`SELECT pg_advisory_xact_lock(${SCHEDULES_FILE_LOCK}::bigint)`.execute(trx);
