import { type Selectable, sql, type Transaction } from 'kysely';
import type { Db } from '../db/database.js';
import { queueVisible } from '../db/queue-patterns.js';
import type { Database, QueueStatsTable, QueuesTable } from '../db/schema.js';
import { DomainError } from '../errors.js';

/**
 * SQL for baton.queues and baton.queue_stats. (The enqueue and claim statements read a queue row
 * inside their own statement; the leader's garbage collection lives in src/maintenance/queue-gc.ts.)
 */

export type QueueRow = Selectable<QueuesTable>;
export type QueueStatsRow = Selectable<QueueStatsTable>;
/** A queue as reads show it: its row, and whether Baton pushes its jobs (docs/push.md). */
export type ListedQueueRow = QueueRow & { push: boolean };

/** A queue row's `push`: a primary-key probe of baton.push_endpoints (migration 0024). */
const isPushQueue =
  sql<boolean>`EXISTS (SELECT 1 FROM baton.push_endpoints p WHERE p.queue = baton.queues.name)`.as('push');

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
export async function createAutoQueue(db: Db, name: string, maxQueues: number): Promise<void> {
  await db.transaction().execute((trx) => createAutoQueueInTransaction(trx, name, maxQueues));
}

/**
 * The same, inside the caller's transaction (the queue is visible to others once it commits). The
 * advisory lock is held until then, so keep such transactions short.
 */
export async function createAutoQueueInTransaction(
  trx: Transaction<Database>,
  name: string,
  maxQueues: number,
): Promise<void> {
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
}

/**
 * Hold a queue's row FOR KEY SHARE until the transaction ends, as every enqueue does (shared among
 * producers; the GC's delete waits for it). False when there is no such queue.
 */
export async function holdQueue(trx: Transaction<Database>, name: string): Promise<boolean> {
  const { rows } = await sql`SELECT 1 FROM baton.queues WHERE name = ${name} FOR KEY SHARE`.execute(trx);
  return rows.length > 0;
}

/**
 * A queue's row, locked until the transaction ends, for a change that reads the queue before it
 * writes: `update` (FOR UPDATE) for a change of the row itself, `share` (FOR SHARE) for a change
 * beside it (a group override) that must see the queue's settings as they stay until it commits.
 * Undefined when there is no such queue.
 */
export async function lockQueue(
  trx: Transaction<Database>,
  name: string,
  mode: 'update' | 'share',
): Promise<QueueRow | undefined> {
  const query = trx.selectFrom('baton.queues').selectAll().where('name', '=', name);
  const row = await (mode === 'update' ? query.forUpdate() : query.forShare()).executeTakeFirst();
  return row as QueueRow | undefined;
}

/** Advisory lock key serialising auto-creation (an arbitrary constant: "baton" in ASCII). */
const AUTO_QUEUE_LOCK = 0x6261746f6e;

export async function getQueue(
  db: Db,
  name: string,
): Promise<{ queue: ListedQueueRow; stats?: QueueStatsRow } | undefined> {
  const queue = await db
    .selectFrom('baton.queues')
    .selectAll()
    .select(isPushQueue)
    .where('name', '=', name)
    .executeTakeFirst();
  if (!queue) return undefined;
  const stats = await db
    .selectFrom('baton.queue_stats')
    .selectAll()
    .where('queue', '=', name)
    .executeTakeFirst();
  return { queue: queue as ListedQueueRow, stats: stats as QueueStatsRow | undefined };
}

/**
 * Queues in name order after `after`, with their maintained statistics; with `patterns` (regular
 * expressions), only the queues whose names match one; with `prefix`, only names starting with it.
 */
export async function listQueues(
  db: Db,
  limit: number,
  after?: string,
  patterns?: string[],
  prefix?: string,
) {
  let query = db.selectFrom('baton.queues').selectAll().select(isPushQueue).orderBy('name').limit(limit);
  if (after !== undefined) query = query.where('name', '>', after);
  if (patterns !== undefined) query = query.where(sql<boolean>`name ~ ANY(${patterns}::text[])`);
  if (prefix !== undefined) query = query.where(sql<boolean>`starts_with(name, ${prefix})`);
  const queues = (await query.execute()) as ListedQueueRow[];
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
  timeout_ms?: number | null;
  concurrency_limit?: number | null;
  rate_limit?: number | null;
  rate_period_ms?: number | null;
  group_concurrency_limit?: number | null;
  group_rate_limit?: number | null;
  group_rate_period_ms?: number | null;
  /**
   * Mark the queue grouped from the start (claims serve its groups in turn and apply the group
   * limits), rather than from the first job with a group: an SQS FIFO queue, all of whose jobs have
   * a group, is created so. Never set back to false (a queue that had groups stays grouped).
   */
  grouped?: true;
  /** The queue's metadata (baton.queues.meta) as plain JSON, replacing what was there. */
  meta?: unknown;
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
  const columns: Record<string, unknown> = { ...changes };
  if (changes.meta !== undefined) columns.meta = changes.meta === null ? null : JSON.stringify(changes.meta);
  const values = { ...columns, name, auto_created: false };
  const updates = { ...columns, auto_created: false, updated_at: sql`now()` };
  const row = await db
    .insertInto('baton.queues')
    .values(values as never)
    .onConflict((oc) => oc.column('name').doUpdateSet(updates as never))
    .returning(sql<boolean>`xmax = 0`.as('created'))
    .executeTakeFirstOrThrow();
  return { created: row.created };
}

/**
 * Create a queue with this configuration unless one of that name exists; an existing one becomes
 * managed (auto_created = false) when `adopt` accepts it. Of concurrent creators exactly one
 * inserts, and the others read the row it inserted (their lock waits for its commit). Returns the
 * row, and whether this call created it.
 */
export async function createQueueOnce(
  trx: Transaction<Database>,
  name: string,
  changes: QueueChanges,
  adopt: (existing: QueueRow) => boolean,
): Promise<{ created: boolean; queue: QueueRow }> {
  const columns: Record<string, unknown> = { ...changes };
  if (changes.meta !== undefined) columns.meta = changes.meta === null ? null : JSON.stringify(changes.meta);
  const inserted = await trx
    .insertInto('baton.queues')
    .values({ ...columns, name, auto_created: false } as never)
    .onConflict((oc) => oc.column('name').doNothing())
    .returningAll()
    .executeTakeFirst();
  if (inserted) return { created: true, queue: inserted as QueueRow };
  const existing = await lockQueue(trx, name, 'update');
  if (!existing) throw new Error(`queue ${name} was neither inserted nor found`);
  if (existing.auto_created && adopt(existing)) await upsertQueue(trx, name, {});
  return { created: false, queue: existing };
}

export async function setPaused(db: Db, name: string, paused: boolean): Promise<boolean> {
  const result = await db
    .updateTable('baton.queues')
    .set({ paused, updated_at: sql`now()` } as never)
    .where('name', '=', name)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) > 0;
}

/**
 * Lock a queue's row for deletion (FOR UPDATE: it waits for in-flight enqueues, which hold FOR KEY
 * SHARE, and makes new ones wait). False when there is no such queue.
 */
export async function lockQueueForDelete(db: Db, name: string): Promise<boolean> {
  const locked = await sql`SELECT 1 FROM baton.queues WHERE name = ${name} FOR UPDATE`.execute(db);
  return locked.rows.length > 0;
}

/** Remove a queue's row and its statistics (after lockQueueForDelete, in the same transaction). */
export async function removeQueue(db: Db, name: string): Promise<void> {
  await sql`DELETE FROM baton.queues WHERE name = ${name}`.execute(db);
  await sql`DELETE FROM baton.queue_stats WHERE queue = ${name}`.execute(db);
}

/**
 * Queues whose dead jobs go to another queue (`meta.dead_letter_queue`, set through the SQS
 * endpoint's RedrivePolicy): every such route, or with `target`, only those into that queue.
 */
export async function deadLetterRoutes(
  db: Db,
  target?: string,
  patterns?: string[],
): Promise<{ queue: string; deadLetterQueue: string }[]> {
  const { rows } = await sql<{ queue: string; dead_letter_queue: string }>`
    SELECT name AS queue, meta->>'dead_letter_queue' AS dead_letter_queue FROM baton.queues
    WHERE meta ? 'dead_letter_queue' AND (${target ?? null}::text IS NULL OR meta->>'dead_letter_queue' = ${target ?? null})
      AND ${queueVisible('name', patterns)}
    ORDER BY name`.execute(db);
  return rows.map((r) => ({ queue: r.queue, deadLetterQueue: r.dead_letter_queue }));
}

/** Every queue's maintained counts, for the metric gauges (one small table, never a count). */
export async function statsForMetrics(db: Db, limit: number) {
  const { rows } = await sql<{
    queue: string;
    waiting: string;
    scheduled: string;
    ready: string;
    claimed: string;
    completed: string;
    dead: string;
    cancelled: string;
    oldest_ready_seconds: number | null;
    age_seconds: number | null;
  }>`
    SELECT queue, waiting, scheduled, ready, claimed, completed, dead, cancelled,
           extract(epoch FROM live_refreshed_at - oldest_ready_at)::float8 AS oldest_ready_seconds,
           extract(epoch FROM now() - live_refreshed_at)::float8 AS age_seconds
    FROM baton.queue_stats ORDER BY queue LIMIT ${limit}`.execute(db);
  return rows;
}
