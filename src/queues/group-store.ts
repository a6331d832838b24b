import { type Selectable, sql, type Transaction } from 'kysely';
import type { Db } from '../db/database.js';
import type { Database, QueueGroupsTable } from '../db/schema.js';
import { queueNotFound } from '../errors.js';

/**
 * SQL for a queue's groups as operators see them: baton.queue_groups (overrides of the queue's
 * group defaults, written only here) and baton.group_stats (counts, written by the leader's
 * group-stats duty; read here). The claim reads the overrides in its own statement
 * (src/jobs/claim/grouped.ts, flow.ts).
 */

export type GroupOverrideRow = Selectable<QueueGroupsTable>;

/** Overrides a PUT may change. `undefined` keeps the current value; `null` resets to the queue default. */
export interface GroupChanges {
  concurrency_limit?: number | null;
  rate_limit?: number | null;
  rate_period_ms?: number | null;
  weight?: number | null;
  paused?: boolean;
}

/** A group as listed: its counts (zero when never counted) and its overrides (null when none). */
export interface GroupRow {
  group_key: string;
  ready: string;
  claimed: string;
  scheduled: string;
  override: GroupOverrideRow | null;
}

/**
 * Set a group's overrides, in the caller's transaction, which holds the queue's row (the service
 * checks the queue first, service/queues.ts). The queue becomes explicitly managed (auto_created = false), since configuring a group configures the queue, so the leader never
 * collects it and its overrides with it. The group gets a (zero) counts row at once, so the list
 * shows it before the leader next counts.
 */
export async function putGroupOverride(
  trx: Transaction<Database>,
  queue: string,
  group: string,
  changes: GroupChanges,
): Promise<void> {
  await sql`UPDATE baton.queues SET auto_created = false, updated_at = now()
            WHERE name = ${queue} AND auto_created`.execute(trx);
  await trx
    .insertInto('baton.queue_groups')
    .values({ ...changes, queue, group_key: group } as never)
    .onConflict((oc) =>
      oc.columns(['queue', 'group_key']).doUpdateSet({ ...changes, updated_at: sql`now()` } as never),
    )
    .execute();
  await sql`INSERT INTO baton.group_stats (queue, group_key) VALUES (${queue}, ${group})
            ON CONFLICT DO NOTHING`.execute(trx);
}

/** Drop a group's overrides (it follows the queue's defaults again). Answers whether it had any. */
export async function deleteGroupOverride(db: Db, queue: string, group: string): Promise<boolean> {
  const { rows } = await sql<{ queue_exists: boolean; reset: boolean }>`
    WITH gone AS (
      DELETE FROM baton.queue_groups WHERE queue = ${queue} AND group_key = ${group} RETURNING 1
    )
    SELECT EXISTS (SELECT 1 FROM baton.queues WHERE name = ${queue}) AS queue_exists,
           EXISTS (SELECT 1 FROM gone) AS reset`.execute(db);
  if (!rows[0]?.queue_exists) throw queueNotFound(queue);
  return rows[0].reset;
}

/** One group, counted or not (any name is a group; one never seen has no jobs). */
export async function getGroup(db: Db, queue: string, group: string): Promise<GroupRow> {
  const { rows } = await sql<GroupRow>`
    SELECT ${group}::text AS group_key, coalesce(gs.ready, 0)::text AS ready,
           coalesce(gs.claimed, 0)::text AS claimed, coalesce(gs.scheduled, 0)::text AS scheduled,
           (SELECT to_jsonb(o) FROM baton.queue_groups o WHERE o.queue = ${queue} AND o.group_key = ${group}) AS override
    FROM (SELECT 1) one
    LEFT JOIN baton.group_stats gs ON gs.queue = ${queue} AND gs.group_key = ${group}`.execute(db);
  return withDates(rows[0]!);
}

/** Page key of the groups list: [ready + claimed, group], busiest first, then by name. */
export type GroupListKey = [string, string];

/**
 * A page of a queue's groups, busiest (ready + claimed) first, by keyset on group_stats_busiest_idx.
 * The counts change between pages as the leader recounts, so a group whose load changed may show on
 * two pages or none; each page is one short index scan.
 */
export async function listGroups(
  db: Db,
  queue: string,
  limit: number,
  after?: GroupListKey,
): Promise<{ rows: GroupRow[]; next?: GroupListKey }> {
  const keyset = after
    ? sql`AND ((gs.ready + gs.claimed) < ${after[0]}::bigint
              OR ((gs.ready + gs.claimed) = ${after[0]}::bigint AND gs.group_key > ${after[1]}))`
    : sql``;
  const { rows } = await sql<GroupRow & { load: string }>`
    SELECT gs.group_key, gs.ready::text AS ready, gs.claimed::text AS claimed, gs.scheduled::text AS scheduled,
           (gs.ready + gs.claimed)::text AS load,
           (SELECT to_jsonb(o) FROM baton.queue_groups o WHERE o.queue = gs.queue AND o.group_key = gs.group_key)
             AS override
    FROM baton.group_stats gs
    WHERE gs.queue = ${queue} ${keyset}
    ORDER BY (gs.ready + gs.claimed) DESC, gs.group_key
    LIMIT ${limit}`.execute(db);
  const last = rows.at(-1);
  return {
    rows: rows.map(({ load: _, ...row }) => withDates(row)),
    next: rows.length === limit && last ? [last.load, last.group_key] : undefined,
  };
}

/** When the leader last counted the queue's groups (null: not yet). */
export async function groupsCountedAt(db: Db, queue: string): Promise<Date | null> {
  const { rows } = await sql<{ at: Date | null }>`
    SELECT groups_refreshed_at AS at FROM baton.queue_stats WHERE queue = ${queue}`.execute(db);
  return rows[0]?.at ?? null;
}

/** to_jsonb() gives timestamps as text; the row type promises Dates. */
function withDates(row: GroupRow): GroupRow {
  const o = row.override as (GroupOverrideRow & { updated_at: Date | string }) | null;
  return o ? { ...row, override: { ...o, updated_at: new Date(o.updated_at) } } : row;
}
