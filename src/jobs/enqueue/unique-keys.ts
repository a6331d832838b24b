import { sql, type Transaction } from 'kysely';
import type { Db } from '../../db/database.js';
import type { Database } from '../../db/schema.js';
import { carriedColumns, carriedValues, type EnqueuedRow } from '../job-row.js';
import type { EnqueueItem } from './item.js';

/**
 * Unique jobs: at most one waiting (scheduled, ready, or waiting for its parents) job per queue and
 * `unique_key`.
 *
 * The key's holder is a row of baton.unique_keys (queue, key, job_id). The ring is partitioned by
 * slot, so a unique index there would have to include the slot and could not say "one per key";
 * a plain side table can, and its primary key is where enqueues of one key meet.
 *
 * Two paths (enqueue.ts):
 * - No transaction, for what a snapshot can decide: one statement (insertJobsGated) inserts the
 *   key's row (a new key) or takes it over (its job is visibly claimed, finished or expired: none
 *   of these waits again), then the job; for a held key whose items all say `keep`, a second
 *   statement (waitingHolders) answers the job the row names if it visibly waits. A row inserted or
 *   taken over by an enqueue that committed after the snapshot names a job the snapshot cannot
 *   see: it is never taken over, and goes to the second path. So a new key costs one round trip,
 *   as a plain enqueue does, and a `keep` of a waiting job two.
 * - The locking path (resolveUniqueKeys, in a transaction): take the key's row lock (INSERT ... ON
 *   CONFLICT DO UPDATE, which locks the existing row or inserts a new one), so the enqueues of one
 *   key wait for each other here; then look at the job the row names, as of now:
 *   - still waiting (scheduled or ready, not expired): `keep` answers it; `replace` gives it the new
 *     payload, priority and run_at (a delete and an insert under the same id, so the job moves
 *     between the ring and the scheduled jobs when its run_at says so);
 *   - no longer waiting (claimed, finished, cancelled, expired, gone): the row is stale and this
 *     enqueue takes it over for its new job.
 * Either way the key is free again from the moment its job is claimed, and no statement that moves
 * a job out of waiting (claim, cancel, purge, the expiry sweep) has to touch the key: the claim
 * path pays nothing for unique keys. A job that comes back to waiting (a retry, a re-arm, a claim
 * handed back, a redrive) takes its key back, or gives way to a newer job holding it, in the
 * transaction that returns it (unique-return.ts).
 *
 * A replace races a claim of the same job on the job's row: the claim's FOR UPDATE SKIP LOCKED
 * skips a row the replace holds, and a replace that waited for a claim finds the row claimed, takes
 * the key over and enqueues a new job (the claimed job, should it come back, then gives way). Stale
 * rows are removed by the leader's expiry sweep (maintenance/expiry.ts), a bounded slice per tick; until then they are
 * harmless (the next enqueue of the key takes them over).
 */

/** One enqueue item's outcome: insert it (maybe with a later item's data), answer another's job, or a waiting job. */
export type UniqueDecision = { insert: EnqueueItem } | { sameAs: number } | { job: EnqueuedRow };

/**
 * Decide, for items with ids already drawn, what each unique-keyed item does (items without a key
 * are left undefined: they are inserted as they are). Keys are taken in sorted order so two batches
 * sharing keys cannot deadlock. Must run in the transaction that then inserts the new jobs.
 */
export async function resolveUniqueKeys(
  trx: Transaction<Database>,
  queue: string,
  items: EnqueueItem[],
  ids: string[],
): Promise<(UniqueDecision | undefined)[]> {
  const decisions: (UniqueDecision | undefined)[] = items.map(() => undefined);
  const byKey = new Map<string, number[]>();
  items.forEach((item, i) => {
    if (item.uniqueKey === undefined) return;
    const members = byKey.get(item.uniqueKey) ?? [];
    members.push(i);
    byKey.set(item.uniqueKey, members);
  });
  const keys = [...byKey.keys()].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  for (const key of keys) {
    const members = byKey.get(key)!;
    const first = members[0]!;
    const holder = await holdKey(trx, queue, key, ids[first]!);
    if (holder !== ids[first]) {
      // The key named a job: the latest `replace` among this request's items decides its data.
      const replacer = members.findLast((i) => items[i]!.onConflict === 'replace');
      const waiting =
        replacer === undefined
          ? await waitingJob(trx, queue, key, holder)
          : await replaceWaiting(trx, queue, key, holder, items[replacer]!);
      if (waiting) {
        for (const i of members) decisions[i] = { job: waiting };
        continue;
      }
      // No longer waiting: this enqueue takes the key for its own new job.
      await sql`UPDATE baton.unique_keys SET job_id = ${ids[first]}::bigint
                WHERE queue = ${queue} AND key = ${key}`.execute(trx);
    }
    // A new job: the first item's, with the data of the latest `replace` after it in this request.
    const replacer = members.slice(1).findLast((i) => items[i]!.onConflict === 'replace');
    decisions[first] = {
      insert: replacer === undefined ? items[first]! : replaced(items[first]!, items[replacer]!),
    };
    for (const i of members.slice(1)) decisions[i] = { sameAs: first };
  }
  return decisions;
}

/**
 * The items of one request by unique key: each key's items in request order, what a new job for the
 * key holds (the first item's fields, with the payload, priority and run_at of the latest `replace`
 * after it), and whether every item says `keep` (then a waiting job is answered as it is).
 */
export function keyGroups(
  items: EnqueueItem[],
): Map<string, { members: number[]; insert: EnqueueItem; keep: boolean }> {
  const groups = new Map<string, { members: number[]; insert: EnqueueItem; keep: boolean }>();
  items.forEach((item, i) => {
    if (item.uniqueKey === undefined) return;
    const group = groups.get(item.uniqueKey);
    if (!group)
      groups.set(item.uniqueKey, { members: [i], insert: item, keep: item.onConflict !== 'replace' });
    else {
      group.members.push(i);
      if (item.onConflict === 'replace') {
        group.insert = replaced(group.insert, item);
        group.keep = false;
      }
    }
  });
  return groups;
}

/** What `replace` changes: the payload, priority and run_at; the rest stays as the first enqueue set it. */
function replaced(item: EnqueueItem, by: EnqueueItem): EnqueueItem {
  return {
    ...item,
    payloadJson: by.payloadJson,
    priority: by.priority,
    delayMs: by.delayMs,
    runAt: by.runAt,
  };
}

/** Lock the key's row, inserting it for `id` if absent; answers the job id it names. */
async function holdKey(trx: Transaction<Database>, queue: string, key: string, id: string): Promise<string> {
  const { rows } = await sql<{ job_id: string }>`
    INSERT INTO baton.unique_keys AS k (queue, key, job_id) VALUES (${queue}, ${key}, ${id}::bigint)
    ON CONFLICT (queue, key) DO UPDATE SET job_id = k.job_id
    RETURNING job_id`.execute(trx);
  return rows[0]!.job_id;
}

/** A waiting job (scheduled, or ready in the ring: the caller says which) not expired, still carrying the key. */
const waitingFilter = (queue: string, key: string) => sql`queue = ${queue} AND unique_key = ${key}
  AND (expires_at IS NULL OR expires_at > now())`;

/** The job holding the key if it still waits (one snapshot of both tables: a promotion is seen once). */
async function waitingJob(
  trx: Transaction<Database>,
  queue: string,
  key: string,
  id: string,
): Promise<EnqueuedRow | undefined> {
  const { rows } = await sql<EnqueuedRow>`
    SELECT id, queue, group_key, 'scheduled'::text AS state, priority, run_at, attempts, max_attempts,
           idempotency_key, created_at, timeout_ms, expires_at, unique_key
    FROM baton.scheduled_jobs WHERE id = ${id}::bigint AND ${waitingFilter(queue, key)}
    UNION ALL
    SELECT id, queue, group_key, state, priority, run_at, attempts, max_attempts,
           idempotency_key, created_at, timeout_ms, expires_at, unique_key
    FROM baton.jobs WHERE id = ${id}::bigint AND state = 'ready' AND ${waitingFilter(queue, key)}
    UNION ALL
    SELECT id, queue, group_key, 'waiting'::text AS state, priority, run_at, attempts, max_attempts,
           idempotency_key, created_at, timeout_ms, expires_at, unique_key
    FROM baton.waiting_jobs WHERE id = ${id}::bigint AND ${waitingFilter(queue, key)}`.execute(trx);
  return rows[0];
}

/**
 * Give the waiting job the new item's payload, priority and run_at: delete it where it waits and
 * insert it again under its id, into the ring when due now and among the scheduled jobs otherwise.
 * The scheduled jobs are tried first, then the ring (a statement of its own, with a fresh snapshot):
 * a job the promoter moved meanwhile is found in the ring. Undefined when it no longer waits.
 */
async function replaceWaiting(
  trx: Transaction<Database>,
  queue: string,
  key: string,
  id: string,
  by: EnqueueItem,
): Promise<EnqueuedRow | undefined> {
  // A job waiting for its parents keeps its place there (its counter, its edges): changed in place.
  const { rows: held } = await sql<EnqueuedRow>`
    UPDATE baton.waiting_jobs SET payload = ${by.payloadJson}::jsonb, priority = ${by.priority}::integer,
      run_at = coalesce(${by.runAt ?? null}::timestamptz, now() + ${by.delayMs ?? 0}::bigint * interval '1 millisecond')
    WHERE id = ${id}::bigint AND ${waitingFilter(queue, key)}
    RETURNING id, queue, group_key, 'waiting'::text AS state, priority, run_at, attempts, max_attempts,
              idempotency_key, created_at, timeout_ms, expires_at, unique_key`.execute(trx);
  if (held[0]) return held[0];
  for (const from of ['scheduled', 'ring'] as const) {
    const gone =
      from === 'scheduled'
        ? sql`DELETE FROM baton.scheduled_jobs WHERE id = ${id}::bigint AND ${waitingFilter(queue, key)} RETURNING *`
        : sql`DELETE FROM baton.jobs WHERE id = ${id}::bigint AND state = 'ready' AND ${waitingFilter(queue, key)}
              RETURNING *`;
    // The job takes the new data; a progress report from an earlier attempt was about the old.
    const changed = {
      payload: sql`${by.payloadJson}::jsonb`,
      priority: sql`${by.priority}::integer`,
      progress: sql`NULL::jsonb`,
    };
    const { rows } = await sql<EnqueuedRow>`
      WITH gone AS (${gone}), moved AS MATERIALIZED (
        SELECT g.*, coalesce(${by.runAt ?? null}::timestamptz,
                             now() + ${by.delayMs ?? 0}::bigint * interval '1 millisecond') AS new_run_at
        FROM gone g
      ), due AS (
        INSERT INTO baton.jobs (slot, ${carriedColumns}, state, run_at, attempts, last_error, errors)
        SELECT baton.job_slot(id), ${carriedValues(changed)}, 'ready', new_run_at, attempts, last_error, errors
        FROM moved WHERE new_run_at <= now()
        RETURNING id, queue, group_key, state, priority, run_at, attempts, max_attempts,
                  idempotency_key, created_at, timeout_ms, expires_at, unique_key
      ), later AS (
        INSERT INTO baton.scheduled_jobs (${carriedColumns}, run_at, attempts, last_error, errors)
        SELECT ${carriedValues(changed)}, new_run_at, attempts, last_error, errors
        FROM moved WHERE new_run_at > now()
        RETURNING id, queue, group_key, 'scheduled'::text AS state, priority, run_at, attempts, max_attempts,
                  idempotency_key, created_at, timeout_ms, expires_at, unique_key
      )
      SELECT * FROM due UNION ALL SELECT * FROM later`.execute(trx);
    if (rows[0]) return rows[0];
  }
  return undefined;
}

/**
 * Remove up to `limit` stale key rows (their job no longer waits), for the leader's expiry sweep.
 * Walks the keys from `after` on (a cursor the sweep keeps), so each tick reads a bounded slice and
 * a full pass visits every key. The delete matches the job id it read, so a row an enqueue has just
 * taken over for a new job is kept (PostgreSQL re-checks the match on the row's newest version).
 * Answers how many went, and where the next slice starts (undefined: back to the start).
 */
export async function removeStaleUniqueKeys(
  db: Db,
  after: UniqueKeyCursor | undefined,
  limit: number,
): Promise<{ removed: number; next: UniqueKeyCursor | undefined }> {
  const { rows } = await sql<{
    n: number;
    removed: number;
    last_queue: string | null;
    last_key: string | null;
  }>`
    WITH slice AS MATERIALIZED (
      SELECT queue, key, job_id, generation FROM baton.unique_keys
      WHERE ${after === undefined ? sql`true` : sql`(queue, key) > (${after.queue}::text, ${after.key}::text)`}
      ORDER BY queue, key
      LIMIT ${limit}
    ), stale AS (
      SELECT s.queue, s.key, s.job_id, s.generation FROM slice s
      WHERE NOT EXISTS (SELECT 1 FROM baton.scheduled_jobs j WHERE j.id = s.job_id)
        AND NOT EXISTS (SELECT 1 FROM baton.jobs j WHERE j.id = s.job_id AND j.state = 'ready')
        AND NOT EXISTS (SELECT 1 FROM baton.waiting_jobs w WHERE w.id = s.job_id)
    ), removed AS (
      -- The generation too: a job that came back to waiting after this snapshot bumped it.
      DELETE FROM baton.unique_keys k USING stale s
      WHERE k.queue = s.queue AND k.key = s.key AND k.job_id = s.job_id AND k.generation = s.generation
      RETURNING 1
    ), last AS (
      SELECT queue, key FROM slice ORDER BY queue DESC, key DESC LIMIT 1
    )
    SELECT (SELECT count(*)::int FROM slice) AS n, (SELECT count(*)::int FROM removed) AS removed,
           (SELECT queue FROM last) AS last_queue, (SELECT key FROM last) AS last_key`.execute(db);
  const r = rows[0]!;
  const full = r.n >= limit && r.last_queue !== null && r.last_key !== null;
  return { removed: r.removed, next: full ? { queue: r.last_queue!, key: r.last_key! } : undefined };
}

export interface UniqueKeyCursor {
  queue: string;
  key: string;
}
