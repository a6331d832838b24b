import { type RawBuilder, sql } from 'kysely';
import type { Db } from '../db/database.js';
import { finishedJobColumns, type JobRow, liveJobColumns } from './job-row.js';
import type { JobState } from './states.js';

/**
 * List a queue's jobs in one state, a page at a time, by keyset (never OFFSET): each page starts
 * strictly after the last row of the previous one in a fixed total order, so a job is returned at
 * most once even while jobs are added or leave the state, and every page is one short index range
 * scan with no transaction held across pages. Each state is listed in the order of its index:
 *
 *   ready      claim order: priority DESC, run_at, id   (what runs next comes first)
 *   scheduled  run_at, id                                (due soonest first)
 *   claimed    id                                        (claimed longest ago first, roughly)
 *   completed, dead, cancelled   finished_at, id         (finished longest ago first)
 *
 * `desc` reverses the order. The cursor carries the sort key of the last row at full database
 * precision (timestamps as text), so no row is skipped or repeated at a page boundary.
 */

export interface ListOptions {
  queue: string;
  state: JobState;
  limit: number;
  desc: boolean;
  cursor?: unknown[];
}

export class BadCursor extends Error {}

type Key = [string, string, string] | [string, string] | [string];

function keysetCondition(state: JobState, desc: boolean, key: unknown[]) {
  const cmp = desc ? sql`<` : sql`>`;
  const str = (v: unknown) => {
    if (typeof v !== 'string' || v.length > 64) throw new BadCursor();
    return v;
  };
  switch (state) {
    case 'ready': {
      const [priority, runAt, id] = key as Key;
      if (!/^-?\d+$/.test(str(priority))) throw new BadCursor();
      // Mixed directions (priority DESC, then run_at and id ASC) cannot use one row comparison.
      const pcmp = desc ? sql`>` : sql`<`;
      return sql`(j.priority ${pcmp} ${Number(priority)}::integer OR (j.priority = ${Number(priority)}::integer
        AND (j.run_at, j.id) ${cmp} (${str(runAt)}::timestamptz, ${str(id)}::bigint)))`;
    }
    case 'scheduled': {
      const [runAt, id] = key as Key;
      return sql`(j.run_at, j.id) ${cmp} (${str(runAt)}::timestamptz, ${str(id)}::bigint)`;
    }
    case 'claimed':
      return sql`j.id ${cmp} ${str(key[0])}::bigint`;
    default: {
      const [finishedAt, id] = key as Key;
      return sql`(h.finished_at, h.id) ${cmp} (${str(finishedAt)}::timestamptz, ${str(id)}::bigint)`;
    }
  }
}

export async function listJobs(db: Db, opts: ListOptions): Promise<{ rows: JobRow[]; next?: unknown[] }> {
  const { queue, state, limit, desc, cursor } = opts;
  const dir = desc ? sql`DESC` : sql`ASC`;
  const after = cursor ? keysetCondition(state, desc, cursor) : sql`true`;
  let query: RawBuilder<JobRow & { sort_key: unknown[] }>;
  if (state === 'ready') {
    const pdir = desc ? sql`ASC` : sql`DESC`;
    query = sql<JobRow & { sort_key: unknown[] }>`
      SELECT ${liveJobColumns}, json_build_array(j.priority::text, j.run_at::text, j.id::text) AS sort_key
      FROM baton.jobs j WHERE j.queue = ${queue} AND j.state = 'ready' AND ${after}
      ORDER BY j.priority ${pdir}, j.run_at ${dir}, j.id ${dir} LIMIT ${limit}`;
  } else if (state === 'scheduled') {
    query = sql<JobRow & { sort_key: unknown[] }>`
      SELECT ${liveJobColumns}, json_build_array(j.run_at::text, j.id::text) AS sort_key
      FROM baton.jobs j WHERE j.queue = ${queue} AND j.state = 'scheduled' AND ${after}
      ORDER BY j.run_at ${dir}, j.id ${dir} LIMIT ${limit}`;
  } else if (state === 'claimed') {
    query = sql<JobRow & { sort_key: unknown[] }>`
      SELECT ${liveJobColumns}, json_build_array(j.id::text) AS sort_key
      FROM baton.jobs j WHERE j.queue = ${queue} AND j.state = 'claimed' AND ${after}
      ORDER BY j.id ${dir} LIMIT ${limit}`;
  } else {
    query = sql<JobRow & { sort_key: unknown[] }>`
      SELECT ${finishedJobColumns}, json_build_array(h.finished_at::text, h.id::text) AS sort_key
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

export function encodeCursor(key: unknown[]): string {
  return Buffer.from(JSON.stringify(key)).toString('base64url');
}

export function decodeCursor(cursor: string): unknown[] {
  try {
    const key = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
    if (!Array.isArray(key) || key.length === 0 || key.length > 3) throw new BadCursor();
    return key;
  } catch {
    throw new BadCursor();
  }
}
