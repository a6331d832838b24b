import { type RawBuilder, sql } from 'kysely';
import type { Db } from '../db/database.js';
import type { JobState } from '../job-states.js';
import { type JobRow, jobRowColumns } from './job-row.js';
import { acrossJobTables, getScopedJobs, type JobTableAlias, scopedJobsQuery } from './read.js';

/**
 * The statements of awaiting jobs (wake/await-finish.ts). A waiter learns whether its jobs have
 * finished from ids and states alone; it reads its rows whole once, when its answer is due, and the
 * answer's payloads, results and errors are bounded by a byte budget.
 */

type Item = { id: string; queue?: string };

/** A job's id and state, in each table a job may be in (off the ring, the table says the state). */
const STATES: Record<JobTableAlias, RawBuilder<unknown>> = {
  j: sql`j.id, j.state`,
  s: sql`s.id, 'scheduled'`,
  w: sql`w.id, 'waiting'`,
  h: sql`h.id, h.state`,
};

/** Ids and states of these items' jobs (each in its item's queue when it names one); absent: none. */
export async function awaitedStates(db: Db, items: readonly Item[]): Promise<Map<string, JobState>> {
  if (items.length === 0) return new Map();
  const { rows } = await acrossJobTables<{ id: string; state: JobState }>(items, (a) => STATES[a]).execute(
    db,
  );
  return new Map(rows.map((r) => [r.id, r.state]));
}

/**
 * Which of these jobs have finished (a job is finished exactly while it is in baton.job_history),
 * with their queue, so that the caller wakes only a waiter whose key may see the job: the one check
 * per poll interval of everything awaited on a replica (wake/finish-poll.ts).
 */
export async function finishedAmong(
  db: Db,
  ids: readonly string[],
): Promise<{ id: string; queue: string }[]> {
  if (ids.length === 0) return [];
  const { rows } = await sql<{ id: string; queue: string }>`
    SELECT h.id, h.queue FROM baton.job_history h WHERE h.id = ANY(${ids}::bigint[])`.execute(db);
  return rows;
}

/** What an await answers: the jobs found, and those of them answered without their bodies. */
export interface AwaitAnswer {
  jobs: Map<string, JobRow>;
  /** Ids (in request order) answered without payload, result and errors: past the byte budget. */
  omitted: string[];
}

/** The columns a job may hold up to BATON_PAYLOAD_LIMIT_BYTES each in (errors: twenty times). */
const BODIES = { payload: sql`NULL`, result: sql`NULL`, errors: sql`'[]'::jsonb`, last_error: sql`NULL` };

/** Their size as JSON text, of table alias `a` (`result` only in history). */
function bodyBytes(a: string, withResult: boolean) {
  const t = (c: string) => sql`coalesce(octet_length(${sql.ref(`${a}.${c}`)}::text), 0)`;
  return sql`${t('payload')} + ${t('errors')} + ${t('last_error')}${withResult ? sql` + ${t('result')}` : sql``}`;
}

/**
 * Read the answer of an await: these items' jobs, whole, in request order until their bodies add up
 * to `maxBytes`; the first job is always whole (a single job answers as a plain read would), and from
 * the first that would pass the budget on, jobs come without payload, result and errors, listed in
 * `omitted`. The sizes are measured in PostgreSQL first (one small statement), so a body past the
 * budget never leaves the database.
 */
export async function readAwaitAnswer(
  db: Db,
  items: readonly Item[],
  maxBytes: number,
): Promise<AwaitAnswer> {
  if (items.length <= 1) return { jobs: await getScopedJobs(db, items), omitted: [] };
  const { rows: sizes } = await acrossJobTables<{ id: string; bytes: string }>(
    items,
    (a) => sql`${sql.ref(`${a}.id`)}, ${bodyBytes(a, a === 'h')} AS bytes`,
  ).execute(db);
  const bytesOf = new Map(sizes.map((r) => [r.id, Number(r.bytes)]));
  const omitted: string[] = [];
  let total = 0;
  let whole = 0;
  for (const { id } of items) {
    const bytes = bytesOf.get(id);
    if (bytes === undefined) continue;
    if (omitted.length > 0 || (whole > 0 && total + bytes > maxBytes)) omitted.push(id);
    else {
      total += bytes;
      whole++;
    }
  }
  if (omitted.length === 0) return { jobs: await getScopedJobs(db, items), omitted };
  const omit = sql`${omitted}::bigint[]`;
  const columns = sql.join(
    Object.keys(jobRowColumns).map((c) =>
      c in BODIES
        ? sql`CASE WHEN r.id = ANY(${omit}) THEN ${BODIES[c as keyof typeof BODIES]} ELSE ${sql.ref(`r.${c}`)} END AS ${sql.ref(c)}`
        : sql.ref(`r.${c}`),
    ),
  );
  const { rows } = await sql<JobRow>`SELECT ${columns} FROM (${scopedJobsQuery(items)}) r`.execute(db);
  return { jobs: new Map(rows.map((r) => [r.id, r])), omitted };
}
