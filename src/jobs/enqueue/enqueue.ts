import { sql, type Transaction } from 'kysely';
import type { Db } from '../../db/database.js';
import type { Database } from '../../db/schema.js';
import { StatementShapes } from '../../db/statement-shapes.js';
import { queueNotFound } from '../../errors.js';
import {
  type AutoCreatePolicy,
  createAutoQueue,
  createAutoQueueInTransaction,
  holdQueue,
} from '../../queues/queue-store.js';
import { type EnqueuedRow, notExpired } from '../job-row.js';
import { claimIdempotencyKeys, KeysOfGoneJobs, pointKeysAt, type StaleKey } from './idempotency-keys.js';
import type { EnqueueItem } from './item.js';
import { keyGroups, resolveUniqueKeys } from './unique-keys.js';

/**
 * Enqueue: insert jobs into baton.jobs, `ready` when due now and `scheduled` otherwise.
 *
 * The shape of the insert comes from two production incidents (docs/architecture.md, "Lessons from
 * production queues"):
 * - It never writes the queue's row. One row per queue rewritten on every enqueue serialises all
 *   producers of that queue on a row lock. Instead the statement reads the queue row with
 *   FOR KEY SHARE, which producers share with each other but which conflicts with a DELETE.
 * - So an enqueue and the leader's garbage collection of an idle auto-created queue serialise on
 *   that row: either the GC waits for our insert to commit (and then sees a live job and keeps the
 *   queue), or we wait for the GC and find no row. No row means the insert inserts nothing; we
 *   (re)create the queue and insert again. The race heals itself and never loses the job.
 */

export type { EnqueueItem, OnConflict } from './item.js';

export interface EnqueueOptions {
  autoCreate: AutoCreatePolicy;
  defaultMaxAttempts: number;
  idempotencyRetentionMs: number;
}

export interface EnqueueResult {
  job: EnqueuedRow;
  /** false when an idempotency key matched an existing job, or a unique key a waiting one. */
  created: boolean;
}

/** Marker: the insert found no queue row. */
export const QUEUE_MISSING: unique symbol = Symbol('queue missing');

/** Items that must go through a transaction: an idempotency key or a unique key holds a row lock. */
const needsTransaction = (items: EnqueueItem[]) =>
  items.some((i) => i.idempotencyKey !== undefined || i.uniqueKey !== undefined);

/** What an enqueue reads back of each job (EnqueuedRow). */
export const enqueuedColumns = sql`id, queue, group_key, state, priority, run_at, attempts, max_attempts,
  idempotency_key, created_at, timeout_ms, expires_at, unique_key`;

export async function enqueueJobs(
  db: Db,
  queue: string,
  items: EnqueueItem[],
  opts: EnqueueOptions,
): Promise<EnqueueResult[]> {
  const keyed = items.some((i) => i.idempotencyKey !== undefined);
  const unique = !keyed && items.some((i) => i.uniqueKey !== undefined);
  // One retry after creating the queue is enough: a queue the leader collects must have been idle for
  // BATON_QUEUE_IDLE_MS, so one we have just created cannot be collected again before our retry.
  // (The third try only guards against a leader whose idle time is set absurdly low.)
  // Keys found naming a job that is gone: the next attempt takes them over (see KeysOfGoneJobs).
  let gone: StaleKey[] = [];
  for (let attempt = 0; attempt < 3; attempt++) {
    const result = keyed
      ? await db
          .transaction()
          .execute((trx) => insertWithKeys(trx, queue, items, opts, gone))
          .catch((err): typeof QUEUE_MISSING | KeysOfGoneJobs => {
            if (err === QUEUE_MISSING || err instanceof KeysOfGoneJobs) return err;
            throw err;
          })
      : unique
        ? await enqueueUnique(db, queue, items, opts.defaultMaxAttempts)
        : await insertJobs(db, queue, items, [], opts.defaultMaxAttempts).then((rows) =>
            rows === QUEUE_MISSING ? rows : rows.map((job) => ({ job, created: true })),
          );
    if (result instanceof KeysOfGoneJobs) {
      gone = result.keys;
      continue;
    }
    if (result !== QUEUE_MISSING) return result;
    if (!opts.autoCreate.enabled) {
      throw queueNotFound(queue, ' and auto-create is off (BATON_AUTO_CREATE_QUEUES)');
    }
    await createAutoQueue(db, queue, opts.autoCreate.maxQueues);
  }
  throw new Error(`queue ${queue} vanished three times during one enqueue`);
}

/**
 * Enqueue inside the caller's transaction, for a writer whose jobs must commit or roll back together
 * with its own rows: the schedules duty enqueues an occurrence and moves its schedule on in one
 * transaction, so the occurrence is enqueued exactly once (src/schedules/fire.ts). The rows go in
 * through the same insert as enqueueJobs (and insertWithKeys when items carry idempotency keys).
 *
 * The queue row is held FOR KEY SHARE first, to the end of the caller's transaction, so the GC cannot
 * remove it between here and the insert; a missing queue is created in the same transaction, under
 * the same auto-create policy and cap (queue_not_found or queue_limit_reached otherwise).
 */
export async function enqueueInTransaction(
  trx: Transaction<Database>,
  queue: string,
  items: EnqueueItem[],
  opts: EnqueueOptions,
): Promise<EnqueueResult[]> {
  await holdOrCreateQueue(trx, queue, opts);
  if (needsTransaction(items)) return insertWithKeys(trx, queue, items, opts);
  const rows = await insertJobs(trx, queue, items, [], opts.defaultMaxAttempts);
  if (rows === QUEUE_MISSING) throw new Error(`queue ${queue} vanished while its row was held`);
  return rows.map((job) => ({ job, created: true }));
}

/**
 * Hold the queue row FOR KEY SHARE to the end of the transaction (the GC cannot remove it meanwhile),
 * creating a missing queue under the auto-create policy and cap first.
 */
export async function holdOrCreateQueue(
  trx: Transaction<Database>,
  queue: string,
  opts: EnqueueOptions,
): Promise<void> {
  if (await holdQueue(trx, queue)) return;
  if (!opts.autoCreate.enabled) {
    throw queueNotFound(queue, ' and auto-create is off (BATON_AUTO_CREATE_QUEUES)');
  }
  await createAutoQueueInTransaction(trx, queue, opts.autoCreate.maxQueues);
  if (!(await holdQueue(trx, queue))) throw new Error(`queue ${queue} is missing right after creating it`);
}

/**
 * The insert itself: one statement for the whole batch. Items arrive as one JSON array (each item's
 * payload spliced in as the text it is, itemJson()), so a batch of 1,000 is one round trip with no
 * per-row parameters. Ids are drawn from the sequence up front so the rows come back in
 * request order. `ids[i]`, when given, is the id reserved for item i by its idempotency key.
 * Jobs due now go into the ring (baton.jobs, in their id's slot), the others into
 * baton.scheduled_jobs (see ring.ts): two inserts of one statement, one per table.
 */
export async function insertJobs(
  db: Db,
  queue: string,
  items: EnqueueItem[],
  ids: (string | null)[],
  defaultMaxAttempts: number,
): Promise<EnqueuedRow[] | typeof QUEUE_MISSING> {
  if (items.length === 0) return [];
  const { rows } = await runInsert(db, queue, items, ids, defaultMaxAttempts, 'plain');
  return rows.length === 0 ? QUEUE_MISSING : rows;
}

/**
 * The same insert for items with unique keys, in one statement and no transaction (the common case
 * of unique.ts in one round trip): each item with a key (at most one per key) first inserts the
 * key's row, or takes over a row whose job this statement's snapshot shows no longer waiting
 * (claimed, finished, expired: none of these waits again), and only then inserts its job. Answers,
 * by position, the jobs inserted; an item whose key is held (by a waiting job, or by one the
 * snapshot cannot see: committed after it began) is absent, for waitingHolders() and the locking
 * path (resolveUniqueKeys).
 */
async function insertJobsGated(
  db: Db,
  queue: string,
  items: EnqueueItem[],
  defaultMaxAttempts: number,
): Promise<Map<number, EnqueuedRow> | typeof QUEUE_MISSING> {
  const { rows } = await runInsert(db, queue, items, [], defaultMaxAttempts, 'gated');
  if (rows.length === 0) return QUEUE_MISSING;
  // The jobs inserted, in request order (by id): an item without a key always is, and an item with
  // one is the row carrying its key (the items name each key once), so one pass pairs them.
  const jobs = rows.filter((row) => row.how === 'inserted');
  const inserted = new Map<number, EnqueuedRow>();
  let next = 0;
  items.forEach((item, i) => {
    const row = jobs[next];
    if (row && row.unique_key === (item.uniqueKey ?? null)) {
      const { how: _, ...job } = row;
      inserted.set(i, job);
      next++;
    }
  });
  return inserted;
}

/**
 * The waiting jobs holding these keys (scheduled, or ready in the ring, and not expired; a retry too,
 * which took its key back: unique-return.ts), as one snapshot sees them (for `keep`: answering a job that
 * waited at that moment is as if this enqueue came just then, and it changes nothing). A key whose
 * job does not wait in the snapshot is absent. A separate statement from the insert, so that the
 * insert's plan carries no probe of the ring for what only conflicting keys need.
 */
async function waitingHolders(db: Db, queue: string, keys: string[]): Promise<Map<string, EnqueuedRow>> {
  const { rows } = await sql<EnqueuedRow & { key: string }>`
    SELECT k.key, w.* FROM baton.unique_keys k
    CROSS JOIN LATERAL (
      SELECT s.id, s.queue, s.group_key, 'scheduled'::text AS state, s.priority, s.run_at, s.attempts,
             s.max_attempts, s.idempotency_key, s.created_at, s.timeout_ms, s.expires_at, s.unique_key
      FROM baton.scheduled_jobs s WHERE s.id = k.job_id AND s.unique_key = k.key AND ${notExpired('s')}
      UNION ALL
      SELECT j.id, j.queue, j.group_key, j.state, j.priority, j.run_at, j.attempts,
             j.max_attempts, j.idempotency_key, j.created_at, j.timeout_ms, j.expires_at, j.unique_key
      FROM baton.jobs j WHERE j.id = k.job_id AND j.state = 'ready' AND j.unique_key = k.key AND ${notExpired('j')}
      UNION ALL
      SELECT p.id, p.queue, p.group_key, 'waiting'::text AS state, p.priority, p.run_at, p.attempts,
             p.max_attempts, p.idempotency_key, p.created_at, p.timeout_ms, p.expires_at, p.unique_key
      FROM baton.waiting_jobs p WHERE p.id = k.job_id AND p.unique_key = k.key AND ${notExpired('p')}
    ) w
    WHERE k.queue = ${queue} AND k.key = ANY(${keys}::text[])`.execute(db);
  return new Map(rows.map(({ key, ...job }) => [key, job]));
}

/** The insert's values: queue, whether any item has a group, the items as JSON text, default. */
type InsertValues = [queue: string, grouped: boolean, items: string, defaultMaxAttempts: number];

/** Compiled once per variant (db/statement-shapes.ts). */
const insertStatements = new StatementShapes(insertStatement);

function runInsert(
  db: Db,
  queue: string,
  items: EnqueueItem[],
  ids: (string | null)[],
  defaultMaxAttempts: number,
  variant: 'plain' | 'gated',
) {
  const grouped = items.some((i) => i.group !== undefined);
  const text = `[${items.map((item, i) => itemJson(item, ids[i] ?? null)).join(',')}]`;
  return insertStatements.execute(db, variant, [queue, grouped, text, defaultMaxAttempts]);
}

/**
 * One item as the insert reads it: its payload spliced in as the text it already is, then only the
 * fields it sets (jsonb_to_recordset reads an absent key as NULL), so a plain job is
 * `{"payload":...}` and pays nothing for the fields it does not use.
 */
function itemJson(item: EnqueueItem, id: string | null): string {
  let text = `{"payload":${item.payloadJson}`;
  const field = (name: string, value: unknown) => {
    if (value !== undefined && value !== null) text += `,"${name}":${JSON.stringify(value)}`;
  };
  field('id', id);
  if (item.priority !== 0) field('priority', item.priority);
  field('delay_ms', item.delayMs);
  field('run_at', item.runAt);
  field('max_attempts', item.maxAttempts);
  field('idempotency_key', item.idempotencyKey);
  field('group_key', item.group);
  field('meta', item.meta);
  field('timeout_ms', item.timeoutMs);
  field('expires_at', item.expiresAt);
  field('expires_in_ms', item.expiresInMs);
  field('unique_key', item.uniqueKey);
  return `${text}}`;
}

function insertStatement(variant: 'plain' | 'gated', ...values: InsertValues) {
  const [queue, grouped, items, defaultMaxAttempts] = values;
  const gated = variant === 'gated';
  // Gated: the key rows first; jobs only for the items that got theirs (or have none).
  const gate = gated
    ? sql`, held AS (
      INSERT INTO baton.unique_keys AS k (queue, key, job_id)
      SELECT ${queue}, i.unique_key, i.id FROM input i
      WHERE i.unique_key IS NOT NULL
      ORDER BY i.unique_key
      ON CONFLICT (queue, key) DO UPDATE SET job_id = excluded.job_id
        -- Take over only a key whose job the snapshot shows no longer waiting; a job it cannot see
        -- (committed after it began) is judged by the locking path. So is a row whose generation
        -- moved since the snapshot: a job came back to waiting and took the key back meanwhile
        -- (unique-return.ts), which the snapshot shows still claimed or dead.
        WHERE k.generation = (SELECT s.generation FROM baton.unique_keys s WHERE s.queue = k.queue AND s.key = k.key)
          AND (EXISTS (SELECT 1 FROM baton.job_history h WHERE h.id = k.job_id)
               OR EXISTS (SELECT 1 FROM baton.jobs j WHERE j.id = k.job_id AND NOT (j.state = 'ready' AND ${notExpired('j')}))
               OR EXISTS (SELECT 1 FROM baton.scheduled_jobs s WHERE s.id = k.job_id AND NOT (${notExpired('s')})))
      RETURNING job_id
    ), go AS MATERIALIZED (
      SELECT * FROM input i WHERE i.unique_key IS NULL OR i.id IN (SELECT job_id FROM held)
    )`
    : sql``;
  const from = gated ? sql`go` : sql`input`;
  // The rows in request order: ids are drawn (or were reserved) in request order, so by id. Not
  // joined back to `input` for its ordinality: the request pool plans without hash and merge joins
  // (db/database.ts), and a join of two CTE scans is then a nested loop comparing every row with
  // every item, which made a batch of 1,000 cost twice per job what a batch of 100 did.
  const answer = gated
    ? sql`SELECT x.*, 'inserted' AS how FROM (SELECT * FROM due UNION ALL SELECT * FROM later) x
    UNION ALL
    -- The queue existed: tells "nothing inserted" from "no queue".
    SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 'queue' FROM q
    ORDER BY 1`
    : sql`SELECT * FROM due UNION ALL SELECT * FROM later ORDER BY id`;
  // The items arrive as one jsonb array, read by jsonb_to_recordset into typed columns: each item's
  // text is parsed once, payload included, and every field is a plain column from then on. Read as json
  // with ->> per field (and the payloads as a second array, cast to jsonb row by row), the batch was
  // parsed about a dozen times per item, and a batch enqueue cost PostgreSQL more than twice as much
  // (docs/benchmarks.md, "Batch enqueue and the batched full cycle"). A JSON null payload is read as
  // SQL NULL, hence the coalesce.
  return sql<EnqueuedRow & { how?: 'inserted' | 'queue' }>`
    WITH q AS (
      SELECT name, max_attempts FROM baton.queues WHERE name = ${queue} FOR KEY SHARE
    ), mark_grouped AS (
      -- The first job with a group flips the queue into flow mode, once (claims then serve groups in
      -- turn). The row is locked only while the flag is still off (the filter runs before the lock),
      -- and SKIP LOCKED: a concurrent producer flipping it is enough; nobody waits for that row.
      UPDATE baton.queues SET grouped = true
      WHERE name = (SELECT name FROM baton.queues
                    WHERE name = ${queue} AND NOT grouped AND ${grouped}::boolean FOR NO KEY UPDATE SKIP LOCKED)
    ), input AS MATERIALIZED (
      SELECT m.ord,
             coalesce(m.id, nextval('baton.jobs_id_seq')) AS id,
             coalesce(m.run_at, now() + coalesce(m.delay_ms, 0) * interval '1 millisecond') AS run_at,
             coalesce(m.expires_at, now() + m.expires_in_ms * interval '1 millisecond') AS expires_at,
             coalesce(m.payload, 'null'::jsonb) AS payload, coalesce(m.priority, 0) AS priority,
             coalesce(m.group_key, '') AS group_key, m.max_attempts, m.idempotency_key, m.meta, m.timeout_ms,
             m.unique_key
      FROM ROWS FROM (jsonb_to_recordset(${items}::jsonb) AS (
             payload jsonb, id bigint, priority integer, delay_ms bigint, run_at timestamptz, max_attempts integer,
             idempotency_key text, group_key text, meta jsonb, timeout_ms integer, expires_at timestamptz,
             expires_in_ms bigint, unique_key text)
           ) WITH ORDINALITY AS m(payload, id, priority, delay_ms, run_at, max_attempts, idempotency_key, group_key,
                                 meta, timeout_ms, expires_at, expires_in_ms, unique_key, ord)
      -- No queue row: draw no ids (the caller creates the queue and runs this again).
      WHERE EXISTS (SELECT 1 FROM q)
    )${gate}, due AS (
      INSERT INTO baton.jobs (slot, id, queue, group_key, state, priority, run_at, max_attempts, idempotency_key,
                              payload, meta, timeout_ms, expires_at, unique_key)
      SELECT baton.job_slot(i.id), i.id, q.name, i.group_key, 'ready', i.priority, i.run_at,
             coalesce(i.max_attempts, q.max_attempts, ${defaultMaxAttempts}::integer),
             i.idempotency_key, i.payload, i.meta, i.timeout_ms, i.expires_at, i.unique_key
      FROM ${from} i CROSS JOIN q WHERE i.run_at <= now()
      RETURNING ${enqueuedColumns}
    ), later AS (
      INSERT INTO baton.scheduled_jobs (id, queue, group_key, priority, run_at, max_attempts, idempotency_key, payload,
                                        meta, timeout_ms, expires_at, unique_key)
      SELECT i.id, q.name, i.group_key, i.priority, i.run_at,
             coalesce(i.max_attempts, q.max_attempts, ${defaultMaxAttempts}::integer),
             i.idempotency_key, i.payload, i.meta, i.timeout_ms, i.expires_at, i.unique_key
      FROM ${from} i CROSS JOIN q WHERE i.run_at > now()
      RETURNING id, queue, group_key, 'scheduled'::text AS state, priority, run_at, attempts, max_attempts,
                idempotency_key, created_at, timeout_ms, expires_at, unique_key
    )
    ${answer}`;
}

/**
 * Enqueue items with unique keys (and no idempotency keys), without a transaction where a snapshot
 * can decide: one statement inserts the jobs whose keys are new or stale (insertJobsGated), a second
 * one, only for held keys whose items all say `keep`, answers the waiting jobs holding them
 * (waitingHolders). What is left (a replace of a waiting job, a key taken a moment ago) goes through
 * the locking path (resolveUniqueKeys) in a transaction of its own. Items repeating a key of the
 * same request are answered with their key's job (unique.ts, keyGroups).
 */
async function enqueueUnique(
  db: Db,
  queue: string,
  items: EnqueueItem[],
  defaultMaxAttempts: number,
): Promise<EnqueueResult[] | typeof QUEUE_MISSING> {
  const groups = keyGroups(items);
  const sent: { index: number; item: EnqueueItem }[] = [];
  items.forEach((item, index) => {
    if (item.uniqueKey === undefined) sent.push({ index, item });
    else {
      const group = groups.get(item.uniqueKey)!;
      if (group.members[0] === index) sent.push({ index, item: group.insert });
    }
  });
  const inserted = await insertJobsGated(
    db,
    queue,
    sent.map((s) => s.item),
    defaultMaxAttempts,
  );
  if (inserted === QUEUE_MISSING) return QUEUE_MISSING;
  const results: (EnqueueResult | undefined)[] = items.map(() => undefined);
  const held: string[] = [];
  sent.forEach(({ index }, k) => {
    const key = items[index]!.uniqueKey;
    const job = inserted.get(k);
    if (!job) {
      if (key === undefined) throw new Error(`item ${index} without a unique key was not inserted`);
      held.push(key);
      return;
    }
    const members = key === undefined ? [index] : groups.get(key)!.members;
    for (const i of members) results[i] = { job, created: i === index };
  });
  // Held keys: `keep` answers a waiting holder; the rest (replace, or no holder waiting as far as a
  // snapshot can tell) take the locking path.
  const keepKeys = held.filter((key) => groups.get(key)!.keep);
  const waiting =
    keepKeys.length > 0 ? await waitingHolders(db, queue, keepKeys) : new Map<string, EnqueuedRow>();
  const undecided: number[] = [];
  for (const key of held) {
    const job = waiting.get(key);
    const { members } = groups.get(key)!;
    if (job) for (const i of members) results[i] = { job, created: false };
    else undecided.push(...members);
  }
  if (undecided.length > 0) {
    undecided.sort((a, b) => a - b);
    // The queue row was there a moment ago (the statement above saw it): only a forced delete since.
    const locked = await db.transaction().execute(async (trx) => {
      const { rows } = await sql<{ id: string }>`
        SELECT nextval('baton.jobs_id_seq')::text AS id FROM generate_series(1, ${undecided.length}::integer)`.execute(
        trx,
      );
      return insertUnique(
        trx,
        queue,
        undecided.map((i) => items[i]!),
        rows.map((r) => r.id),
        defaultMaxAttempts,
      ).catch((err) => {
        throw err === QUEUE_MISSING ? queueNotFound(queue) : err;
      });
    });
    undecided.forEach((i, k) => {
      results[i] = locked[k]!;
    });
  }
  return results.map((r) => r!);
}

/**
 * Enqueue with idempotency keys (and unique keys), in one transaction:
 * 1. Draw an id for every item and claim its idempotency key (idempotency-keys.ts): an item whose key
 *    an earlier request holds answers that request's job; one repeating a key of an earlier item
 *    answers that item's job.
 * 2. Insert the rest with the ids drawn, resolving their unique keys first (insertUnique).
 * 3. A key claimed for an item that a waiting job's unique key answered names that job from now on.
 */
async function insertWithKeys(
  trx: Transaction<Database>,
  queue: string,
  items: EnqueueItem[],
  opts: EnqueueOptions,
  gone: StaleKey[] = [],
): Promise<EnqueueResult[]> {
  const keys = await claimIdempotencyKeys(trx, queue, items, opts.idempotencyRetentionMs, gone);
  const toInsert = items.flatMap((_, i) => (keys.answered.has(i) || keys.sameAs.has(i) ? [] : [i]));
  const inserted = await insertUnique(
    trx,
    queue,
    toInsert.map((i) => items[i]!),
    toInsert.map((i) => keys.ids[i]!),
    opts.defaultMaxAttempts,
  );
  const byIndex = new Map(toInsert.map((i, k) => [i, inserted[k]!]));
  await pointKeysAt(trx, queue, items, keys, (i) => byIndex.get(i)!.job);
  return items.map((_, i) => {
    const job = keys.answered.get(i);
    if (job) return { job, created: false };
    const first = keys.sameAs.get(i);
    return first === undefined ? byIndex.get(i)! : { job: byIndex.get(first)!.job, created: false };
  });
}

/**
 * Insert items under the ids drawn for them, resolving their unique keys first (unique.ts): an
 * item whose key a waiting job holds is answered with that job (created: false), and so is an item
 * repeating a key earlier in the same list. Throws QUEUE_MISSING (rolling the transaction back,
 * keys included) when the queue row is gone.
 */
async function insertUnique(
  trx: Transaction<Database>,
  queue: string,
  items: EnqueueItem[],
  ids: string[],
  defaultMaxAttempts: number,
): Promise<EnqueueResult[]> {
  const decisions = await resolveUniqueKeys(trx, queue, items, ids);
  const toInsert: { index: number; item: EnqueueItem }[] = [];
  decisions.forEach((d, index) => {
    if (d === undefined) toInsert.push({ index, item: items[index]! });
    else if ('insert' in d) toInsert.push({ index, item: d.insert });
  });
  const rows = await insertJobs(
    trx,
    queue,
    toInsert.map((t) => t.item),
    toInsert.map((t) => ids[t.index]!),
    defaultMaxAttempts,
  );
  if (rows === QUEUE_MISSING) throw QUEUE_MISSING;
  const byIndex = new Map(toInsert.map((t, i) => [t.index, rows[i]!]));
  return decisions.map((d, index): EnqueueResult => {
    if (d === undefined || 'insert' in d) return { job: byIndex.get(index)!, created: true };
    if ('sameAs' in d) return { job: byIndex.get(d.sameAs)!, created: false };
    return { job: d.job, created: false };
  });
}

/**
 * Forget every idempotency key of a queue at once, rather than when each expires: the SQS endpoint
 * does so when it purges a FIFO queue (SQS clears its deduplication window then) and when it deletes
 * a queue (a queue created again under the name starts with none). Answers how many were dropped.
 */
export async function forgetIdempotencyKeys(db: Db, queue: string): Promise<number> {
  const result = await sql`DELETE FROM baton.idempotency_keys WHERE queue = ${queue}`.execute(db);
  return Number(result.numAffectedRows ?? 0);
}
