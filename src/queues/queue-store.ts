import { type Kysely, type Selectable, sql } from 'kysely';
import type { Db } from '../db/database.js';
import type { Database, QueueStatsTable, QueuesTable } from '../db/schema.js';
import { DomainError } from '../errors.js';
import { finishedRow, type JobRow } from '../jobs/job-row.js';

/**
 * SQL for baton.queues and baton.queue_stats. (The enqueue and claim statements read a queue row
 * inside their own statement; the leader's garbage collection lives in src/maintenance/queue-gc.ts.)
 */

export type QueueRow = Selectable<QueuesTable>;
export type QueueStatsRow = Selectable<QueueStatsTable>;

/** Whether writes to an unknown queue create it, and how many auto-created queues may exist. */
export interface AutoCreatePolicy {
  enabled: boolean;
  maxQueues: number;
}

/**
 * Create an auto-created queue with every setting at its server default. Runs only when a write
 * found no queue row (first use, or the leader collected an idle queue a moment ago), never on the
 * ordinary enqueue path. ON CONFLICT DO NOTHING: a concurrent creator wins harmlessly.
 *
 * At most `maxQueues` auto-created queues exist: one client must not be able to create queues
 * without end (each costs the leader's per-tick work and a row in every listing). Creators take a
 * transaction-scoped advisory lock so the count they check is exact; creating is rare, so the lock
 * is never on a hot path.
 */
export async function createAutoQueue(db: Kysely<Database>, name: string, maxQueues: number): Promise<void> {
  await db.transaction().execute(async (trx) => {
    await sql`SELECT pg_advisory_xact_lock(${AUTO_QUEUE_LOCK}::bigint)`.execute(trx);
    const { rows } = await sql<{ created: boolean }>`
      WITH ins AS (
        INSERT INTO baton.queues (name, auto_created)
        SELECT ${name}, true WHERE (SELECT count(*) FROM baton.queues WHERE auto_created) < ${maxQueues}
        ON CONFLICT (name) DO NOTHING
        RETURNING 1
      )
      SELECT EXISTS (SELECT 1 FROM ins) OR EXISTS (SELECT 1 FROM baton.queues WHERE name = ${name}) AS created`.execute(
      trx,
    );
    if (!rows[0]?.created) {
      throw new DomainError(
        'queue_limit_reached',
        `queue "${name}" does not exist and this server already has ${maxQueues} auto-created queues ` +
          '(BATON_MAX_AUTO_QUEUES): create it with PUT /v1/queues/{queue}, or let idle ones be collected',
      );
    }
  });
}

/** Advisory lock key serialising auto-creation (an arbitrary constant: "baton" in ASCII). */
const AUTO_QUEUE_LOCK = 0x6261746f6e;

export async function getQueue(
  db: Db,
  name: string,
): Promise<{ queue: QueueRow; stats?: QueueStatsRow } | undefined> {
  const queue = await db.selectFrom('baton.queues').selectAll().where('name', '=', name).executeTakeFirst();
  if (!queue) return undefined;
  const stats = await db
    .selectFrom('baton.queue_stats')
    .selectAll()
    .where('queue', '=', name)
    .executeTakeFirst();
  return { queue: queue as QueueRow, stats: stats as QueueStatsRow | undefined };
}

/**
 * Queues in name order after `after`, with their maintained statistics; with `patterns` (regular
 * expressions), only the queues whose names match one.
 */
export async function listQueues(db: Db, limit: number, after?: string, patterns?: string[]) {
  let query = db.selectFrom('baton.queues').selectAll().orderBy('name').limit(limit);
  if (after !== undefined) query = query.where('name', '>', after);
  if (patterns !== undefined) query = query.where(sql<boolean>`name ~ ANY(${patterns}::text[])`);
  const queues = (await query.execute()) as QueueRow[];
  if (queues.length === 0) return [];
  const stats = (await db
    .selectFrom('baton.queue_stats')
    .selectAll()
    .where(
      'queue',
      'in',
      queues.map((q) => q.name),
    )
    .execute()) as QueueStatsRow[];
  const byName = new Map(stats.map((s) => [s.queue, s]));
  return queues.map((queue) => ({ queue, stats: byName.get(queue.name) }));
}

/** Settings a PUT may change. `undefined` keeps the current value; `null` resets to the default. */
export interface QueueChanges {
  lease_ms?: number | null;
  max_attempts?: number | null;
  backoff_base_ms?: number | null;
  backoff_max_ms?: number | null;
  backoff_jitter?: boolean | null;
  completed_retention_ms?: number | null;
  dead_retention_ms?: number | null;
  paused?: boolean;
}

/**
 * Create or update a queue's configuration. Either way the queue is now explicitly managed
 * (auto_created = false), so the leader never collects it. Returns whether it was created.
 */
export async function upsertQueue(
  db: Db,
  name: string,
  changes: QueueChanges,
): Promise<{ created: boolean }> {
  const values = { ...changes, name, auto_created: false } as Record<string, unknown>;
  const updates = { ...changes, auto_created: false, updated_at: sql`now()` } as Record<string, unknown>;
  const row = await db
    .insertInto('baton.queues')
    .values(values as never)
    .onConflict((oc) => oc.column('name').doUpdateSet(updates as never))
    .returning(sql<boolean>`xmax = 0`.as('created'))
    .executeTakeFirstOrThrow();
  return { created: row.created };
}

export async function setPaused(db: Db, name: string, paused: boolean): Promise<boolean> {
  const result = await db
    .updateTable('baton.queues')
    .set({ paused, updated_at: sql`now()` } as never)
    .where('name', '=', name)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) > 0;
}

const cancelled = finishedRow('cancelled');

/** How many live jobs of a queue to cancel per transaction. */
const CANCEL_BATCH = 1000;

/**
 * Cancel live jobs of a queue in bounded batches (each its own transaction), so cancelling a
 * million jobs never holds one giant transaction. `states` picks which live states.
 */
export async function cancelQueueJobs(
  db: Kysely<Database>,
  queue: string,
  states: string[],
): Promise<number> {
  let total = 0;
  while (true) {
    const { rows } = await sql<Pick<JobRow, 'id'>>`
      WITH picked AS (
        SELECT id FROM baton.jobs WHERE queue = ${queue} AND state = ANY(${states}::text[])
        LIMIT ${CANCEL_BATCH} FOR UPDATE SKIP LOCKED
      ), gone AS (
        DELETE FROM baton.jobs j USING picked WHERE j.id = picked.id RETURNING j.*
      )
      INSERT INTO baton.job_history AS h (${cancelled.columns})
      SELECT ${cancelled.values} FROM gone
      RETURNING h.id`.execute(db);
    total += rows.length;
    if (rows.length < CANCEL_BATCH) {
      // A short batch may mean rows locked by someone else (an ack in flight): check before stopping.
      const left = await sql<{ n: number }>`
        SELECT count(*)::int AS n FROM (SELECT 1 FROM baton.jobs WHERE queue = ${queue}
        AND state = ANY(${states}::text[]) LIMIT 1) x`.execute(db);
      if (left.rows[0]!.n === 0) return total;
      if (rows.length === 0) await new Promise((r) => setTimeout(r, 10));
    }
  }
}

export type DeleteOutcome =
  | { deleted: true; cancelled: number }
  | { deleted: false; reason: 'not_found' | 'not_empty'; live: number };

/**
 * Delete a queue. Without force it refuses while the queue has live jobs. With force it cancels them
 * first (in batches), then deletes under the queue row's lock, cancelling any job that arrived in
 * between, so no job is ever left without its queue.
 */
export async function deleteQueue(db: Db, name: string, force: boolean): Promise<DeleteOutcome> {
  let cancelled = force ? await cancelQueueJobs(db, name, ['scheduled', 'ready', 'claimed']) : 0;
  return db.transaction().execute(async (trx) => {
    // Waiting for this lock lets in-flight enqueues (FOR KEY SHARE) finish first; new ones wait for us.
    const locked = await sql`SELECT 1 FROM baton.queues WHERE name = ${name} FOR UPDATE`.execute(trx);
    if (locked.rows.length === 0) return { deleted: false, reason: 'not_found', live: 0 } as const;
    if (force) cancelled += await cancelQueueJobs(trx, name, ['scheduled', 'ready', 'claimed']);
    const live = await sql<{ n: number }>`
      SELECT count(*)::int AS n FROM baton.jobs WHERE queue = ${name}`.execute(trx);
    if (live.rows[0]!.n > 0) return { deleted: false, reason: 'not_empty', live: live.rows[0]!.n } as const;
    await sql`DELETE FROM baton.queues WHERE name = ${name}`.execute(trx);
    await sql`DELETE FROM baton.queue_stats WHERE queue = ${name}`.execute(trx);
    return { deleted: true, cancelled } as const;
  });
}

/** Every queue's maintained counts, for the metric gauges (one small table, never a count). */
export async function statsForMetrics(db: Db, limit: number) {
  const { rows } = await sql<{
    queue: string;
    scheduled: string;
    ready: string;
    claimed: string;
    completed: string;
    dead: string;
    cancelled: string;
    oldest_ready_seconds: number | null;
    age_seconds: number | null;
  }>`
    SELECT queue, scheduled, ready, claimed, completed, dead, cancelled,
           extract(epoch FROM live_refreshed_at - oldest_ready_at)::float8 AS oldest_ready_seconds,
           extract(epoch FROM now() - live_refreshed_at)::float8 AS age_seconds
    FROM baton.queue_stats ORDER BY queue LIMIT ${limit}`.execute(db);
  return rows;
}
