import { type RawBuilder, sql } from 'kysely';
import type { Db } from '../db/database.js';
import { queueVisible } from '../db/queue-patterns.js';
import { StatementShapes } from '../db/statement-shapes.js';
import {
  finishedJobColumns,
  inScope,
  type JobRow,
  liveJobColumns,
  scheduledJobColumns,
  waitingJobColumns,
} from './job-row.js';
import { inSlotShape, type SlotShape, slotShapeOf } from './ring.js';

/**
 * Read one job, live or finished; with `queue`, only a job of that queue (a queue-limited key's
 * scope: lease-outcome.ts's ScopedId).
 */
export async function getJob(db: Db, id: string, queue?: string): Promise<JobRow | undefined> {
  return (await getJobs(db, [id], queue)).get(id);
}

/** Read jobs by id, live or finished (of `queue` only, when given); those not found are absent. */
export async function getJobs(db: Db, ids: string[], queue?: string): Promise<Map<string, JobRow>> {
  if (ids.length === 0) return new Map();
  const scope = sql`${queue ?? null}::text`;
  // Wherever each job is now: the ring (any slot), the scheduled or waiting jobs, or history (ring.ts).
  const { rows } = await sql<JobRow>`
    SELECT ${liveJobColumns} FROM baton.jobs j WHERE j.id = ANY(${ids}::bigint[]) AND ${inScope('j', scope)}
    UNION ALL
    SELECT ${scheduledJobColumns} FROM baton.scheduled_jobs s WHERE s.id = ANY(${ids}::bigint[]) AND ${inScope('s', scope)}
    UNION ALL
    SELECT ${waitingJobColumns} FROM baton.waiting_jobs w WHERE w.id = ANY(${ids}::bigint[]) AND ${inScope('w', scope)}
    UNION ALL
    SELECT ${finishedJobColumns} FROM baton.job_history h WHERE h.id = ANY(${ids}::bigint[]) AND ${inScope('h', scope)}`.execute(
    db,
  );
  return new Map(rows.map((r) => [r.id, r]));
}

/**
 * Read jobs by id, live or finished, of the queues `patterns` match (a queue-limited key's; undefined:
 * every queue), the condition in each statement; those not found or not visible are absent.
 */
export async function getVisibleJobs(
  db: Db,
  ids: string[],
  patterns: string[] | undefined,
): Promise<Map<string, JobRow>> {
  if (patterns === undefined) return getJobs(db, ids);
  if (ids.length === 0) return new Map();
  const visible = (a: string) => queueVisible(`${a}.queue`, patterns);
  const { rows } = await sql<JobRow>`
    SELECT ${liveJobColumns} FROM baton.jobs j WHERE j.id = ANY(${ids}::bigint[]) AND ${visible('j')}
    UNION ALL
    SELECT ${scheduledJobColumns} FROM baton.scheduled_jobs s WHERE s.id = ANY(${ids}::bigint[]) AND ${visible('s')}
    UNION ALL
    SELECT ${waitingJobColumns} FROM baton.waiting_jobs w WHERE w.id = ANY(${ids}::bigint[]) AND ${visible('w')}
    UNION ALL
    SELECT ${finishedJobColumns} FROM baton.job_history h WHERE h.id = ANY(${ids}::bigint[]) AND ${visible('h')}`.execute(
    db,
  );
  return new Map(rows.map((r) => [r.id, r]));
}

/**
 * Read jobs by id, live or finished, each only in its own item's queue when it names one (a
 * queue-limited key's scope, matched by position as the lease writes do); those not found are absent.
 */
export async function getScopedJobs(
  db: Db,
  items: readonly { id: string; queue?: string }[],
): Promise<Map<string, JobRow>> {
  if (items.length === 0) return new Map();
  if (items.every((item) => item.queue === undefined)) {
    return getJobs(
      db,
      items.map((item) => item.id),
    );
  }
  const { rows } = await scopedJobsQuery(items).execute(db);
  return new Map(rows.map((r) => [r.id, r]));
}

/** The tables a job may be in, each under the alias the column lists of job-row.ts are written for. */
export type JobTableAlias = 'j' | 's' | 'w' | 'h';
const JOB_TABLES: [JobTableAlias, string][] = [
  ['j', 'baton.jobs'],
  ['s', 'baton.scheduled_jobs'],
  ['w', 'baton.waiting_jobs'],
  ['h', 'baton.job_history'],
];

/**
 * One SELECT of `columns(alias)` per table a job may be in, joined by UNION ALL, each limited to
 * these items' jobs, in the item's queue when it names one (matched by position, as the lease
 * writes do): the shape of every read of jobs by id wherever they are now.
 */
export function acrossJobTables<T>(
  items: readonly { id: string; queue?: string }[],
  columns: (alias: JobTableAlias) => RawBuilder<unknown>,
) {
  const ids = sql`${items.map((item) => item.id)}::bigint[]`;
  const queues = sql`${items.map((item) => item.queue ?? null)}::text[]`;
  const scope = (a: string) =>
    sql`${sql.ref(`${a}.id`)} = ANY(${ids}) AND ${inScope(a, sql`(${queues})[array_position(${ids}, ${sql.ref(`${a}.id`)})]`)}`;
  return sql<T>`${sql.join(
    JOB_TABLES.map(
      ([a, table]) => sql`SELECT ${columns(a)} FROM ${sql.table(table)} ${sql.raw(a)} WHERE ${scope(a)}`,
    ),
    sql` UNION ALL `,
  )}`;
}

const WHOLE: Record<JobTableAlias, RawBuilder<unknown>> = {
  j: liveJobColumns,
  s: scheduledJobColumns,
  w: waitingJobColumns,
  h: finishedJobColumns,
};

/** The statement of getScopedJobs: these items' jobs, whole, wherever each is now. */
export function scopedJobsQuery(items: readonly { id: string; queue?: string }[]) {
  return acrossJobTables<JobRow>(items, (a) => WHOLE[a]);
}

/**
 * The queue of each of these ids that exists at all (live or finished). Used after a guarded write
 * touched nothing, to tell "not yours any more" (409 lease_lost) from "never existed" (404); before a
 * batch ack with `next` (all of one queue?); and by auth, for a queue-limited key's batch.
 *
 * The jobs a lease write names are mostly claimed, so in the ring, in their id's slot: those are
 * found first by one probe of that slot's primary key (a literal slot, as the ack's: jobs/ring.ts),
 * and only the ids not found there are looked for in every table. Looking in every table first
 * probed each history partition's id index for every id of a batch.
 */
export async function queuesOfJobs(db: Db, ids: string[]): Promise<Map<string, string>> {
  if (ids.length === 0) return new Map();
  const { rows: live } = await ringQueues.execute(db, slotShapeOf(ids), [ids]);
  const found = new Map(live.map((r) => [r.id, r.queue]));
  const missing = ids.filter((id) => !found.has(id));
  if (missing.length === 0) return found;
  for (const [id, queue] of await queuesAnywhere(db, missing)) found.set(id, queue);
  return found;
}

/** The ring's jobs among these ids, looked for in their slots only (SlotShape). */
const ringQueues = new StatementShapes(
  (slots: SlotShape, ids: string[]) =>
    sql<{ id: string; queue: string }>`
    SELECT j.id, j.queue FROM baton.jobs j WHERE j.id = ANY(${ids}::bigint[]) AND ${inSlotShape('j', slots)}`,
);

/** These ids' queues wherever the jobs are: the ring's every slot (a carried job), and the other tables. */
async function queuesAnywhere(db: Db, ids: string[]): Promise<Map<string, string>> {
  const { rows } = await sql<{ id: string; queue: string }>`
    SELECT id, queue FROM baton.jobs WHERE id = ANY(${ids}::bigint[])
    UNION ALL
    SELECT id, queue FROM baton.scheduled_jobs WHERE id = ANY(${ids}::bigint[])
    UNION ALL
    SELECT id, queue FROM baton.waiting_jobs WHERE id = ANY(${ids}::bigint[])
    UNION ALL
    SELECT id, queue FROM baton.job_history WHERE id = ANY(${ids}::bigint[])`.execute(db);
  return new Map(rows.map((r) => [r.id, r.queue]));
}

/**
 * Which of these jobs are still live (waiting, scheduled, ready or claimed): the schedules duty's
 * overlap rule asks whether the previous occurrence's job is still in flight.
 */
export async function liveJobIds(db: Db, ids: string[]): Promise<Set<string>> {
  if (ids.length === 0) return new Set();
  // Live: in the ring (ready or claimed) or waiting among the scheduled jobs.
  const { rows } = await sql<{ id: string }>`
    SELECT id FROM baton.jobs WHERE id = ANY(${ids}::bigint[])
    UNION ALL
    SELECT id FROM baton.scheduled_jobs WHERE id = ANY(${ids}::bigint[])
    UNION ALL
    SELECT id FROM baton.waiting_jobs WHERE id = ANY(${ids}::bigint[])`.execute(db);
  return new Set(rows.map((r) => r.id));
}
