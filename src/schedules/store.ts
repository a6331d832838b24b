import { sql, type Transaction } from 'kysely';
import type { Db } from '../db/database.js';
import type { Database } from '../db/schema.js';
import { isoMicros } from '../db/sql-time.js';
import type { OnConflict } from '../jobs/enqueue/enqueue.js';
import type { ScheduleDefinition } from './definition.js';
import type { CatchUp, Overlap } from './occurrences.js';

/** All SQL of baton.schedules. Jobs go in through jobs/enqueue.ts, never from here. */

type Trx = Transaction<Database>;

export interface ScheduleRow {
  name: string;
  queue: string;
  cron: string;
  timezone: string;
  payload: unknown;
  /** The payload as stored, as JSON text (what an enqueue sends on, numbers exact). */
  payload_json: string;
  priority: number;
  max_attempts: number | null;
  /** The job fields (definition.ts); null: none. */
  group_key: string | null;
  timeout_ms: number | null;
  expires_in_ms: number | null;
  unique_key: string | null;
  on_conflict: OnConflict | null;
  overlap: Overlap;
  catch_up: CatchUp;
  paused: boolean;
  next_run_at: Date | null;
  /** next_run_at at full precision, as text: what an advance must find unchanged. */
  next_run_key: string | null;
  last_run_at: Date | null;
  last_job_id: string | null;
  last_error: { at: string; message: string } | null;
  /** Declared in BATON_SCHEDULES_FILE (else made through the API). */
  from_file: boolean;
  /** From the file, and changed through the API since the file last set it. */
  drifted: boolean;
  created_at: Date;
  updated_at: Date;
}

/** A row's definition as one jsonb value: what drift compares with the file's (jsonb equality). */
const definitionOf = (s: string) => {
  const r = sql.ref(s);
  return sql`jsonb_build_object('queue', ${r}.queue, 'cron', ${r}.cron, 'timezone', ${r}.timezone,
    'payload', ${r}.payload, 'priority', ${r}.priority, 'max_attempts', ${r}.max_attempts,
    'group', ${r}.group_key, 'timeout_ms', ${r}.timeout_ms, 'expires_in_ms', ${r}.expires_in_ms,
    'unique_key', ${r}.unique_key, 'on_conflict', ${r}.on_conflict,
    'overlap', ${r}.overlap, 'catch_up', ${r}.catch_up, 'paused', ${r}.paused)`;
};

/** The same shape built from a definition, to compare with or store as file_spec. */
export function definitionJson(def: ScheduleDefinition): string {
  const { queue, cron, timezone, priority, overlap, paused } = def;
  const head = JSON.stringify({
    queue,
    cron,
    timezone,
    priority,
    max_attempts: def.maxAttempts,
    group: def.group,
    timeout_ms: def.timeoutMs,
    expires_in_ms: def.expiresInMs,
    unique_key: def.uniqueKey,
    on_conflict: def.onConflict,
    overlap,
    catch_up: def.catchUp,
    paused,
  });
  // The payload goes in as its own text so that exact numbers stay exact.
  return `${head.slice(0, -1)},"payload":${def.payloadJson}}`;
}

const columns = sql`s.name, s.queue, s.cron, s.timezone, s.payload, s.payload::text AS payload_json,
  s.priority, s.max_attempts, s.group_key, s.timeout_ms,
  -- bigint; up to ten years of milliseconds, exact as a float8 (a JavaScript number).
  s.expires_in_ms::float8 AS expires_in_ms, s.unique_key, s.on_conflict, s.overlap, s.catch_up, s.paused, s.next_run_at,
  ${isoMicros(sql`s.next_run_at`)} AS next_run_key, s.last_run_at,
  s.last_job_id, s.last_error, s.file_spec IS NOT NULL AS from_file,
  coalesce(${definitionOf('s')} <> s.file_spec, false) AS drifted, s.created_at, s.updated_at`;

export async function databaseNow(db: Db, override?: Date): Promise<Date> {
  const { rows } = await sql<{
    now: Date;
  }>`SELECT coalesce(${override ?? null}::timestamptz, now()) AS now`.execute(db);
  return rows[0]!.now;
}

/**
 * With a queue-limited key's patterns, only a schedule enqueueing into one of its queues is found:
 * the scope holds in the statement, not only in the check auth made before it.
 */
const inScope = (patterns: string[] | undefined) =>
  patterns === undefined ? sql`` : sql`AND s.queue ~ ANY(${patterns}::text[])`;

export async function getSchedule(
  db: Db,
  name: string,
  patterns?: string[],
): Promise<ScheduleRow | undefined> {
  const { rows } = await sql<ScheduleRow>`
    SELECT ${columns} FROM baton.schedules s WHERE s.name = ${name} ${inScope(patterns)}`.execute(db);
  return rows[0];
}

/** The row, locked FOR UPDATE until the transaction ends (waits for the duty or another writer). */
export async function lockSchedule(
  trx: Trx,
  name: string,
  patterns?: string[],
): Promise<ScheduleRow | undefined> {
  const { rows } = await sql<ScheduleRow>`
    SELECT ${columns} FROM baton.schedules s WHERE s.name = ${name} ${inScope(patterns)} FOR UPDATE`.execute(
    trx,
  );
  return rows[0];
}

/** Whether a schedule of this name exists outside the patterns (locked, so it stays so). */
export async function lockedOutOfScope(trx: Trx, name: string, patterns: string[]): Promise<boolean> {
  const { rows } = await sql`
    SELECT 1 FROM baton.schedules s
    WHERE s.name = ${name} AND NOT s.queue ~ ANY(${patterns}::text[]) FOR UPDATE`.execute(trx);
  return rows.length > 0;
}

export async function queueOfSchedule(db: Db, name: string): Promise<string | undefined> {
  const { rows } = await sql<{
    queue: string;
  }>`SELECT queue FROM baton.schedules WHERE name = ${name}`.execute(db);
  return rows[0]?.queue;
}

/** Schedules in name order after `after`; with `patterns`, only those whose queue matches one. */
export async function listSchedules(db: Db, limit: number, after?: string, patterns?: string[]) {
  // One statement text per filter present (not `$x IS NULL OR ...`): the request pool always runs a
  // statement's generic plan (db/database.ts), which could not start the name index at `after`.
  const from = after === undefined ? sql`` : sql`AND s.name > ${after}`;
  const queues = patterns === undefined ? sql`` : sql`AND s.queue ~ ANY(${patterns}::text[])`;
  const { rows } = await sql<ScheduleRow>`
    SELECT ${columns} FROM baton.schedules s
    WHERE true ${from} ${queues}
    ORDER BY s.name LIMIT ${limit}`.execute(db);
  return rows;
}

/** Write a definition (insert or replace) with its next occurrence; whether the row is new. */
export async function writeSchedule(
  trx: Trx,
  name: string,
  def: ScheduleDefinition,
  nextRunAt: Date | null,
): Promise<{ created: boolean }> {
  const { rows } = await sql<{ created: boolean }>`
    INSERT INTO baton.schedules AS s (name, queue, cron, timezone, payload, priority, max_attempts,
                                      group_key, timeout_ms, expires_in_ms, unique_key, on_conflict,
                                      overlap, catch_up, paused, next_run_at)
    VALUES (${name}, ${def.queue}, ${def.cron}, ${def.timezone}, ${def.payloadJson}::jsonb, ${def.priority},
            ${def.maxAttempts}, ${def.group}, ${def.timeoutMs}, ${def.expiresInMs}, ${def.uniqueKey},
            ${def.onConflict}, ${def.overlap}, ${def.catchUp}, ${def.paused}, ${nextRunAt})
    ON CONFLICT (name) DO UPDATE SET
      queue = excluded.queue, cron = excluded.cron, timezone = excluded.timezone,
      payload = excluded.payload, priority = excluded.priority, max_attempts = excluded.max_attempts,
      group_key = excluded.group_key, timeout_ms = excluded.timeout_ms, expires_in_ms = excluded.expires_in_ms,
      unique_key = excluded.unique_key, on_conflict = excluded.on_conflict,
      overlap = excluded.overlap, catch_up = excluded.catch_up, paused = excluded.paused,
      next_run_at = excluded.next_run_at, updated_at = now()
    RETURNING xmax = 0 AS created`.execute(trx);
  return rows[0]!;
}

/** Advisory lock key serialising schedule creation, so a cap holds under concurrent PUTs ("btnSL"). */
const SCHEDULE_COUNT_LOCK = 0x62746e534c;

/** Hold the creation lock until the transaction ends (taken only by a PUT that creates a schedule). */
export async function lockScheduleCreation(trx: Trx): Promise<void> {
  await sql`SELECT pg_advisory_xact_lock(${SCHEDULE_COUNT_LOCK}::bigint)`.execute(trx);
}

/** How many schedules there are; with `patterns`, only those whose queue matches one. */
export async function countSchedules(trx: Trx, patterns?: string[]): Promise<number> {
  const queues = patterns === undefined ? sql`` : sql`WHERE queue ~ ANY(${patterns}::text[])`;
  const { rows } = await sql<{ n: number }>`
    SELECT count(*)::int AS n FROM baton.schedules ${queues}`.execute(trx);
  return rows[0]!.n;
}

/** Pause or resume (a resumed schedule starts from its next occurrence after now). */
export async function setSchedulePaused(trx: Trx, name: string, paused: boolean, nextRunAt: Date | null) {
  await sql`
    UPDATE baton.schedules SET paused = ${paused}, next_run_at = ${nextRunAt}, updated_at = now()
    WHERE name = ${name}`.execute(trx);
}

export async function deleteSchedule(db: Db, name: string, patterns?: string[]): Promise<boolean> {
  const result = await sql`DELETE FROM baton.schedules s WHERE s.name = ${name} ${inScope(patterns)}`.execute(
    db,
  );
  return Number(result.numAffectedRows ?? 0) > 0;
}

/**
 * Up to `limit` due schedules, oldest occurrence first, locked FOR UPDATE SKIP LOCKED: rows another
 * leader (or a PUT, pause or trigger) holds are left to it. PostgreSQL re-checks the WHERE clause
 * on the newest version of each row it locks, so a row that a leader advanced after this statement's
 * snapshot is not returned. Reads schedules_due_idx, never the whole table; schedules due at the
 * same time come grouped by queue, so a batch makes few insert statements (one per queue).
 */
export async function lockDueSchedules(trx: Trx, now: Date, limit: number): Promise<ScheduleRow[]> {
  const { rows } = await sql<ScheduleRow>`
    SELECT ${columns} FROM baton.schedules s
    WHERE NOT s.paused AND s.next_run_at IS NOT NULL AND s.next_run_at <= ${now}
    ORDER BY s.next_run_at, s.queue
    LIMIT ${limit}
    FOR UPDATE OF s SKIP LOCKED`.execute(trx);
  return rows;
}

export interface Advance {
  name: string;
  /** next_run_key as read under the lock: the update matches only if next_run_at is still that. */
  expected: string;
  next: Date | null;
  /** Set when this run enqueued a job (else last_run_at and last_job_id stay). */
  lastRunAt?: Date;
  lastJobId?: string;
  /** null clears the last error; a message records one. */
  error: string | null;
}

/** Move schedules on after their occurrences; returns how many rows matched their expected next_run_at. */
export async function advanceSchedules(trx: Trx | Db, now: Date, advances: Advance[]): Promise<number> {
  if (advances.length === 0) return 0;
  const input = JSON.stringify(
    advances.map((a) => ({
      name: a.name,
      expected: a.expected,
      next: a.next?.toISOString() ?? null,
      last_run_at: a.lastRunAt?.toISOString() ?? null,
      last_job_id: a.lastJobId ?? null,
      error: a.error,
    })),
  );
  const result = await sql`
    UPDATE baton.schedules s SET
      next_run_at = v.next,
      last_run_at = coalesce(v.last_run_at, s.last_run_at),
      last_job_id = coalesce(v.last_job_id, s.last_job_id),
      last_error = CASE WHEN v.error IS NULL THEN NULL
                        ELSE jsonb_build_object('at', ${now.toISOString()}::text, 'message', v.error) END
    FROM json_to_recordset(${input}::json)
      AS v(name text, expected timestamptz, next timestamptz, last_run_at timestamptz, last_job_id bigint, error text)
    WHERE s.name = v.name AND s.next_run_at = v.expected`.execute(trx);
  return Number(result.numAffectedRows ?? 0);
}

/** A triggered run: the job it enqueued becomes the schedule's last (the overlap rule follows it). */
export async function recordTrigger(trx: Trx, name: string, now: Date, jobId: string): Promise<void> {
  await sql`
    UPDATE baton.schedules SET last_run_at = ${now}, last_job_id = ${jobId}
    WHERE name = ${name}`.execute(trx);
}

/** Milliseconds from the database's now() to the earliest unpaused next_run_at (undefined: none). */
export async function msToNextDue(db: Db): Promise<number | undefined> {
  const { rows } = await sql<{ ms: number | null }>`
    SELECT extract(epoch FROM min(next_run_at) - now())::float8 * 1000 AS ms
    FROM baton.schedules WHERE NOT paused AND next_run_at IS NOT NULL`.execute(db);
  return rows[0]?.ms ?? undefined;
}

/** For the schedules file: does the row equal `spec`, and is it still what the file last set? */
export async function compareWithFile(trx: Trx, name: string, specJson: string) {
  const { rows } = await sql<{ same_as_spec: boolean; unchanged: boolean }>`
    SELECT ${definitionOf('s')} = ${specJson}::jsonb AS same_as_spec,
           coalesce(${definitionOf('s')} = s.file_spec, false) AS unchanged
    FROM baton.schedules s WHERE s.name = ${name}`.execute(trx);
  return rows[0];
}

/** Record what the file set (null: the schedule is no longer the file's). */
export async function setFileSpec(trx: Trx, name: string, specJson: string | null): Promise<void> {
  await sql`UPDATE baton.schedules SET file_spec = ${specJson}::jsonb WHERE name = ${name}`.execute(trx);
}

/** Schedules the file declared before, locked: name, and whether the API has changed them since. */
export async function lockFileSchedules(trx: Trx) {
  const { rows } = await sql<{ name: string; drifted: boolean }>`
    SELECT s.name, ${definitionOf('s')} <> s.file_spec AS drifted
    FROM baton.schedules s WHERE s.file_spec IS NOT NULL ORDER BY s.name FOR UPDATE`.execute(trx);
  return rows;
}
