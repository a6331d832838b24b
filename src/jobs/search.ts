import { type RawBuilder, sql } from 'kysely';
import type { Db } from '../db/database.js';
import { queueVisible } from '../db/queue-patterns.js';
import { isoMicros } from '../db/sql-time.js';
import { invalidField } from '../errors.js';
import { finishedJobColumns, type JobRow, liveJobColumns, scheduledJobColumns } from './job-row.js';
import { isId, isTime } from './list.js';
import { getJobs } from './read.js';

/**
 * The operator's lists across queues (GET /v1/jobs): what failed, newest failure first, and the job
 * a key names. A job list of one queue in one state is list.ts; these cross queues, so each rests on
 * an index of its own (migrations/0018_failure_lists.ts):
 *
 *   dead     dead jobs by finished_at DESC, id DESC: a backward walk of job_history_dead's
 *            (finished_at, id) index, one day partition after another; with a queue, that queue's
 *            (queue, state, finished_at, id) index instead.
 *   failing  live jobs whose last attempt failed (`last_error` set: retrying now, or waiting to),
 *            by the time of that failure DESC, id DESC: the partial indexes hold only such jobs, so
 *            the sort is over the jobs retrying, never over every live job.
 *
 * Both page by keyset, the last row's (time, id), and stop at `limit`; filters by group and error
 * text are applied on the walk. A queue-limited key's patterns are a condition of every statement,
 * so a job of another tenant is never read, not merely dropped afterwards.
 */

export type FailureKind = 'failing' | 'dead';

export interface FailureListOptions {
  kind: FailureKind;
  /** Only jobs that failed at or after this time (ISO 8601). */
  since?: string;
  /** Only jobs that failed at or before this time: a bulk action's bound, what was counted (ISO 8601). */
  until?: string;
  queue?: string;
  group?: string;
  /** Only jobs whose last error's message contains this text, ignoring case. */
  error?: string;
  /** A queue-limited key's queue patterns (PostgreSQL regular expressions); undefined: every queue. */
  patterns?: string[];
  limit: number;
  after?: FailureKey;
}

/** The sort key of a row: [the failure's time in UTC with microseconds, id]. */
export type FailureKey = [string, string];

export interface FailurePage {
  rows: JobRow[];
  next?: FailureKey;
}

/** A decoded page key checked part by part, as list.ts checks its own; a 400 naming `cursor` otherwise. */
export function parseFailureKey(key: string[] | undefined): FailureKey {
  const [at, id] = key ?? [];
  if (key?.length !== 2 || !isTime(at) || !isId(id)) {
    throw invalidField('cursor', 'is not a cursor this server issued for this list');
  }
  return [at!, id!];
}

/**
 * The conditions every list shares, on table alias `a`. One statement text per combination of
 * filters (not `$x IS NULL OR ...`): the request pool runs generic plans (db/database.ts), which
 * could use the queue's index only this way.
 */
function filters(a: string, opts: FailureListOptions): RawBuilder<unknown> {
  const parts: RawBuilder<unknown>[] = [queueVisible(`${a}.queue`, opts.patterns)];
  const col = (c: string) => sql.ref(`${a}.${c}`);
  if (opts.queue !== undefined) parts.push(sql`${col('queue')} = ${opts.queue}`);
  if (opts.group !== undefined) parts.push(sql`${col('group_key')} = ${opts.group}`);
  if (opts.error !== undefined) {
    parts.push(sql`strpos(lower(${col('last_error')}->>'message'), lower(${opts.error}::text)) > 0`);
  }
  return sql.join(parts, sql` AND `);
}

export async function listFailures(db: Db, opts: FailureListOptions): Promise<FailurePage> {
  const { rows } = await failures(opts).execute(db);
  const last = rows.at(-1);
  return {
    rows: rows.map(({ sort_key: _, ...row }) => row),
    next: rows.length === opts.limit && last ? last.sort_key : undefined,
  };
}

/**
 * How many jobs a list holds, counted up to `cap` (an answer above `cap` means "more"): the walk of
 * the list itself, stopped there, so a count costs what reading that many jobs of it costs.
 */
export async function countFailures(
  db: Db,
  opts: Omit<FailureListOptions, 'limit' | 'after'>,
  cap: number,
): Promise<number> {
  const { rows } = await sql<{ n: number }>`
    SELECT count(*)::int AS n FROM (${failures({ ...opts, limit: cap + 1 })}) f`.execute(db);
  return rows[0]!.n;
}

type Sorted = JobRow & { sort_key: FailureKey };

const failures = (opts: FailureListOptions) => (opts.kind === 'dead' ? deadJobs(opts) : failingJobs(opts));

/** `time <= until`, or TRUE. */
const until = (time: RawBuilder<unknown>, opts: FailureListOptions) =>
  opts.until === undefined ? sql`TRUE` : sql`${time} <= ${opts.until}::timestamptz`;

function deadJobs(opts: FailureListOptions): RawBuilder<Sorted> {
  const since = opts.since === undefined ? sql`TRUE` : sql`h.finished_at >= ${opts.since}::timestamptz`;
  const after =
    opts.after === undefined
      ? sql`TRUE`
      : sql`(h.finished_at, h.id) < (${opts.after[0]}::timestamptz, ${opts.after[1]}::bigint)`;
  // state = 'dead' as a literal: the plan reads the dead class of history only.
  return sql<Sorted>`
    SELECT ${finishedJobColumns}, json_build_array(${isoMicros(sql`h.finished_at`)}, h.id::text) AS sort_key
    FROM baton.job_history h
    WHERE h.state = 'dead' AND ${filters('h', opts)} AND ${since} AND ${until(sql`h.finished_at`, opts)} AND ${after}
    ORDER BY h.finished_at DESC, h.id DESC
    LIMIT ${opts.limit}`;
}

function failingJobs(opts: FailureListOptions): RawBuilder<Sorted> {
  const failedAt = (a: string) => sql`(${sql.ref(`${a}.last_error`)}->>'at')::timestamptz`;
  // `last_error IS NOT NULL` is the partial indexes' predicate, repeated so the planner uses them.
  const since = opts.since === undefined ? sql`TRUE` : sql`f.failed_at >= ${opts.since}::timestamptz`;
  const after =
    opts.after === undefined
      ? sql`TRUE`
      : sql`(f.failed_at, f.id::bigint) < (${opts.after[0]}::timestamptz, ${opts.after[1]}::bigint)`;
  return sql<Sorted>`
    SELECT f.*, json_build_array(${isoMicros(sql`f.failed_at`)}, f.id::text) AS sort_key
    FROM (
      SELECT ${liveJobColumns}, ${failedAt('j')} AS failed_at
      FROM baton.jobs j WHERE j.last_error IS NOT NULL AND ${filters('j', opts)}
      UNION ALL
      SELECT ${scheduledJobColumns}, ${failedAt('s')} AS failed_at
      FROM baton.scheduled_jobs s WHERE s.last_error IS NOT NULL AND ${filters('s', opts)}
    ) f
    WHERE ${since} AND ${until(sql`f.failed_at`, opts)} AND ${after}
    ORDER BY f.failed_at DESC, f.id DESC
    LIMIT ${opts.limit}`;
}

export type JobKey = { unique_key: string } | { idempotency_key: string };

/**
 * The jobs a key names, in the queues the caller may see (one queue, when given): an idempotency key
 * names the job it created for as long as the key is kept, whatever became of the job; a unique key
 * names the job holding it now (held while the job waits to run: ready, scheduled or waiting) and any
 * job of the key running now. Each queue is probed on its own primary key ((queue, key)) by a walk of
 * baton.queues, since no index leads with the key.
 */
export async function findByKey(
  db: Db,
  key: JobKey,
  opts: { queue?: string; patterns?: string[] },
): Promise<JobRow[]> {
  const queues = sql`SELECT q.name FROM baton.queues q WHERE ${queueVisible('q.name', opts.patterns)}
    ${opts.queue === undefined ? sql`` : sql`AND q.name = ${opts.queue}`}`;
  let ids: string[];
  if ('idempotency_key' in key) {
    const { rows } = await sql<{ id: string }>`
      SELECT k.job_id::text AS id FROM (${queues}) q
      JOIN LATERAL (SELECT job_id FROM baton.idempotency_keys i
                    WHERE i.queue = q.name AND i.key = ${key.idempotency_key} AND i.expires_at > now()) k ON TRUE`.execute(
      db,
    );
    ids = rows.map((r) => r.id);
  } else {
    // The running jobs of the key are in the ring, which is small by design (the stats duty reads it
    // whole every tick); claimed jobs have given their key up.
    const { rows } = await sql<{ id: string }>`
      SELECT k.job_id::text AS id FROM (${queues}) q
      JOIN LATERAL (SELECT job_id FROM baton.unique_keys u WHERE u.queue = q.name AND u.key = ${key.unique_key}) k ON TRUE
      UNION
      SELECT j.id::text FROM baton.jobs j
      WHERE j.unique_key = ${key.unique_key} AND j.state = 'claimed' AND j.queue IN (${queues})`.execute(db);
    ids = rows.map((r) => r.id);
  }
  const jobs = await getJobs(db, ids);
  return [...jobs.values()].sort((a, b) => Number(BigInt(b.id) - BigInt(a.id)));
}
