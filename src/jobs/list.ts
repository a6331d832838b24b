import { type RawBuilder, sql } from 'kysely';
import type { Db } from '../db/database.js';
import { isoMicros } from '../db/sql-time.js';
import { invalidField } from '../errors.js';
import type { JobState } from '../job-states.js';
import {
  claimOrder,
  finishedJobColumns,
  type JobRow,
  liveJobColumns,
  scheduledJobColumns,
  waitingJobColumns,
} from './job-row.js';
import { isJobId, PRIORITY_MAX, PRIORITY_MIN } from './limits.js';

/**
 * List a queue's jobs in one state, a page at a time, by keyset (never OFFSET): each page starts
 * strictly after the last row of the previous one in a fixed total order, so a job is returned at
 * most once even while jobs are added or leave the state, and every page is one short index range
 * scan with no transaction held across pages. Each state is listed in the order of its index:
 *
 *   ready      claim order: priority DESC, run_at, id   (what runs next comes first)
 *   scheduled  run_at, id                                (due soonest first; baton.scheduled_jobs)
 *   claimed    id                                        (claimed longest ago first, roughly)
 *   waiting    id                                        (enqueued first first; baton.waiting_jobs)
 *   completed, dead, cancelled   finished_at, id         (finished longest ago first)
 *
 * `desc` reverses the order. The page key carries the sort key of the last row at full database
 * precision (timestamps in UTC with microseconds), so no row is skipped or repeated at a page
 * boundary. A key comes back from clients, so parseListKey() checks every part of it first.
 */

export interface ListOptions {
  queue: string;
  state: JobState;
  /** Only jobs of this group (undefined: every job). */
  group?: string;
  limit: number;
  desc: boolean;
  after?: ListKey;
}

/** The sort key of a row: ready [priority, run_at, id]; scheduled [run_at, id]; claimed [id]; finished [finished_at, id]. */
export type ListKey = string[];

const UTC_MICROS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;
/**
 * A page key's time: UTC with microseconds, as isoMicros() writes it (search.ts's keys too), of a
 * day that exists (JavaScript reads 2026-02-30 as March 2, PostgreSQL refuses it) in the years Baton
 * stores (1970 to 9999: PostgreSQL refuses year 0000 too), so that no cursor reaches SQL unchecked.
 */
export const isTime = (v: string | undefined) => {
  if (v === undefined || !UTC_MICROS.test(v)) return false;
  const at = new Date(v);
  const year = at.getUTCFullYear();
  return year >= 1970 && year <= 9999 && at.toISOString().slice(0, 19) === v.slice(0, 19);
};
export const isId = (v: string | undefined) => v !== undefined && isJobId(v);
const isPriority = (v: string | undefined) =>
  v !== undefined && /^-?\d{1,10}$/.test(v) && Number(v) >= PRIORITY_MIN && Number(v) <= PRIORITY_MAX;

/** A decoded page key, checked against the state's shape; a 400 naming `cursor` otherwise. */
export function parseListKey(state: JobState, key: string[] | undefined): ListKey {
  const [a, b, c] = key ?? [];
  const ok =
    key !== undefined &&
    (state === 'ready'
      ? key.length === 3 && isPriority(a) && isTime(b) && isId(c)
      : state === 'claimed' || state === 'waiting'
        ? key.length === 1 && isId(a)
        : key.length === 2 && isTime(a) && isId(b));
  if (!ok) throw invalidField('cursor', 'is not a cursor this server issued for this state');
  return key;
}

function keysetCondition(state: JobState, desc: boolean, key: ListKey) {
  const cmp = desc ? sql`<` : sql`>`;
  switch (state) {
    case 'ready': {
      const [priority, runAt, id] = key;
      // Mixed directions (priority DESC, then run_at and id ASC) cannot use one row comparison.
      const pcmp = desc ? sql`>` : sql`<`;
      return sql`(j.priority ${pcmp} ${Number(priority)}::integer OR (j.priority = ${Number(priority)}::integer
        AND (j.run_at, j.id) ${cmp} (${runAt}::timestamptz, ${id}::bigint)))`;
    }
    case 'scheduled': {
      const [runAt, id] = key;
      return sql`(s.run_at, s.id) ${cmp} (${runAt}::timestamptz, ${id}::bigint)`;
    }
    case 'claimed':
      return sql`j.id ${cmp} ${key[0]}::bigint`;
    case 'waiting':
      return sql`w.id ${cmp} ${key[0]}::bigint`;
    default: {
      const [finishedAt, id] = key;
      return sql`(h.finished_at, h.id) ${cmp} (${finishedAt}::timestamptz, ${id}::bigint)`;
    }
  }
}

export async function listJobs(db: Db, opts: ListOptions): Promise<{ rows: JobRow[]; next?: ListKey }> {
  const { queue, state, limit, desc, after: key } = opts;
  const dir = desc ? sql`DESC` : sql`ASC`;
  const keyset = key ? keysetCondition(state, desc, key) : sql`true`;
  // A separate statement text with the group filter (not `$g IS NULL OR ...`), so each text has a
  // plan that uses its index: the group indexes of migrations/0007 lead with (queue, group_key).
  const alias =
    state === 'scheduled'
      ? 's'
      : state === 'waiting'
        ? 'w'
        : state === 'ready' || state === 'claimed'
          ? 'j'
          : 'h';
  const after =
    opts.group === undefined ? keyset : sql`${sql.ref(`${alias}.group_key`)} = ${opts.group} AND ${keyset}`;
  let query: RawBuilder<JobRow & { sort_key: ListKey }>;
  if (state === 'ready') {
    query = sql<JobRow & { sort_key: ListKey }>`
      SELECT ${liveJobColumns}, json_build_array(j.priority::text, ${isoMicros(sql`j.run_at`)}, j.id::text) AS sort_key
      FROM baton.jobs j WHERE j.queue = ${queue} AND j.state = 'ready' AND ${after}
      ORDER BY ${claimOrder('j', desc)} LIMIT ${limit}`;
  } else if (state === 'scheduled') {
    query = sql<JobRow & { sort_key: ListKey }>`
      SELECT ${scheduledJobColumns}, json_build_array(${isoMicros(sql`s.run_at`)}, s.id::text) AS sort_key
      FROM baton.scheduled_jobs s WHERE s.queue = ${queue} AND ${after}
      ORDER BY s.run_at ${dir}, s.id ${dir} LIMIT ${limit}`;
  } else if (state === 'waiting') {
    query = sql<JobRow & { sort_key: ListKey }>`
      SELECT ${waitingJobColumns}, json_build_array(w.id::text) AS sort_key
      FROM baton.waiting_jobs w WHERE w.queue = ${queue} AND ${after}
      ORDER BY w.id ${dir} LIMIT ${limit}`;
  } else if (state === 'claimed') {
    query = sql<JobRow & { sort_key: ListKey }>`
      SELECT ${liveJobColumns}, json_build_array(j.id::text) AS sort_key
      FROM baton.jobs j WHERE j.queue = ${queue} AND j.state = 'claimed' AND ${after}
      ORDER BY j.id ${dir} LIMIT ${limit}`;
  } else {
    query = sql<JobRow & { sort_key: ListKey }>`
      SELECT ${finishedJobColumns}, json_build_array(${isoMicros(sql`h.finished_at`)}, h.id::text) AS sort_key
      FROM baton.job_history h WHERE h.queue = ${queue} AND h.state = ${state} AND ${after}
      ORDER BY h.finished_at ${dir}, h.id ${dir} LIMIT ${limit}`;
  }
  const { rows } = await query.execute(db);
  const last = rows.at(-1);
  return {
    rows: rows.map(({ sort_key: _, ...row }) => row),
    next: rows.length === limit ? last?.sort_key : undefined,
  };
}

/**
 * How many jobs a queue's list (a state, and a group) holds, counted up to `max + 1` (so a caller
 * can say "more than max") and no further: one index range scan that stops there, whatever the
 * queue holds.
 */
export async function countJobs(db: Db, opts: Pick<ListOptions, 'queue' | 'state' | 'group'>, max: number) {
  const { queue, state, group } = opts;
  const table =
    state === 'scheduled'
      ? sql`baton.scheduled_jobs t WHERE t.queue = ${queue}`
      : state === 'waiting'
        ? sql`baton.waiting_jobs t WHERE t.queue = ${queue}`
        : state === 'ready' || state === 'claimed'
          ? sql`baton.jobs t WHERE t.queue = ${queue} AND t.state = ${state}`
          : sql`baton.job_history t WHERE t.queue = ${queue} AND t.state = ${state}`;
  const grouped = group === undefined ? sql`` : sql`AND t.group_key = ${group}`;
  const { rows } = await sql<{ n: string }>`
    SELECT count(*) AS n FROM (SELECT 1 FROM ${table} ${grouped} LIMIT ${max + 1}) counted`.execute(db);
  return Number(rows[0]!.n);
}
