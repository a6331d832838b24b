import { sql, type Transaction } from 'kysely';
import type { Database } from '../../db/schema.js';
import type { EnqueuedRow } from '../job-row.js';
import { getJobs } from '../read.js';
import type { EnqueueItem } from './item.js';

/**
 * Idempotency keys, claimed the one way every keyed enqueue claims them (enqueue.ts's keyed insert,
 * dependencies.ts's graphs, a schedule's occurrence): a request sent again with the same keys creates
 * nothing and answers the jobs the first one created, for as long as the keys are kept.
 *
 * One statement draws an id per item, in request order, and claims each key with INSERT ... ON
 * CONFLICT under the id of the first item carrying it. A key already held (and not expired) is not
 * claimed; a concurrent enqueue with the same key waits here for the first to commit or roll back, so
 * twenty simultaneous requests with one key create exactly one job. Keys are claimed in sorted order,
 * so two batches sharing keys cannot deadlock; the ids are drawn in request order all the same,
 * because ids order jobs due at the same time (claim order is priority, run_at, id): a batch is claimed
 * in the order it was sent, keys or not, which an SQS FIFO queue's message group needs (its messages
 * carry their deduplication ids as keys).
 */

/** An idempotency key and the job it named when that job was found gone. */
export interface StaleKey {
  key: string;
  job_id: string;
}

/**
 * Thrown when an idempotency key still live by this transaction's clock names a job that no longer
 * exists: the leader's prune removed the job in the same instant as the key expired by its own,
 * later clock. The key stands for nothing any more, so the caller runs its transaction again with
 * these keys as `gone`, and the claim takes them over as if they had expired, guarded by the job id
 * each named (a key another enqueue took over meanwhile is left to that one).
 */
export class KeysOfGoneJobs extends Error {
  constructor(readonly keys: StaleKey[]) {
    super(`idempotency keys name jobs that no longer exist: ${keys.map((k) => k.key).join(', ')}`);
  }
}

/** What the claim decided, by item index. */
export interface ClaimedKeys {
  /** The id drawn for each item, in request order. */
  ids: string[];
  /** Items whose key this request claimed: each is new, unless a unique key answers it (pointKeysAt). */
  claimed: Set<number>;
  /** Items whose key an earlier request holds, answered by its job (live or finished). */
  answered: Map<number, EnqueuedRow>;
  /** Items repeating a key an earlier item of this request claimed, with that item. */
  sameAs: Map<number, number>;
}

export async function claimIdempotencyKeys(
  trx: Transaction<Database>,
  queue: string,
  items: EnqueueItem[],
  retentionMs: number,
  gone: StaleKey[] = [],
): Promise<ClaimedKeys> {
  // Each key once, with the (1-based) position of the first item carrying it, in sorted key order.
  const first = new Map<string, number>();
  const sameAs = new Map<number, number>();
  items.forEach((item, i) => {
    const key = item.idempotencyKey;
    if (key === undefined) return;
    const earlier = first.get(key);
    if (earlier === undefined) first.set(key, i);
    else sameAs.set(i, earlier);
  });
  const keys = [...first]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([key, i], pos) => ({ key, ord: i + 1, pos }));
  // `ids` draws one id per item as generate_series yields them, so in request order. The ids are one
  // array indexed by position, and the claimed keys' ids are looked up through a hashed subplan:
  // joined as rows, the request pool's plans (no hash or merge joins, db/database.ts) compared every
  // item with every key, which made a batch of 1,000 keyed jobs cost six times a plain one.
  const { rows } = await sql<{ id: string; claimed: boolean }>`
    WITH ids AS MATERIALIZED (
      SELECT ARRAY(SELECT nextval('baton.jobs_id_seq') FROM generate_series(1, ${items.length}::integer)) AS id
    ), claimed AS (
      INSERT INTO baton.idempotency_keys AS k (queue, key, job_id, expires_at)
      SELECT ${queue}, t.key, ids.id[t.ord], now() + ${retentionMs}::bigint * interval '1 millisecond'
      FROM json_to_recordset(${JSON.stringify(keys)}::json) AS t(key text, ord integer, pos integer)
      CROSS JOIN ids
      ORDER BY t.pos
      ON CONFLICT (queue, key) DO UPDATE SET job_id = excluded.job_id, expires_at = excluded.expires_at
        WHERE k.expires_at <= now()
           OR (k.key, k.job_id) IN (SELECT g.key, g.job_id::bigint
                                    FROM json_to_recordset(${JSON.stringify(gone)}::json) AS g(key text, job_id text))
      RETURNING job_id
    )
    SELECT ids.id[g.ord]::text AS id, ids.id[g.ord] IN (SELECT job_id FROM claimed) AS claimed
    FROM ids CROSS JOIN generate_series(1, ${items.length}::integer) AS g(ord) ORDER BY g.ord`.execute(trx);

  const ids = rows.map((r) => r.id);
  const claimed = new Set<number>();
  const held: string[] = [];
  for (const [key, i] of first) {
    if (rows[i]!.claimed) claimed.add(i);
    else held.push(key);
  }
  const answered = new Map<number, EnqueuedRow>();
  if (held.length > 0) {
    const { rows: keyRows } = await sql<StaleKey>`
      SELECT key, job_id::text FROM baton.idempotency_keys
      WHERE queue = ${queue} AND key = ANY(${held}::text[])`.execute(trx);
    const jobs = await getJobs(
      trx,
      keyRows.map((k) => k.job_id),
    );
    const stale = keyRows.filter((k) => !jobs.has(k.job_id));
    if (stale.length > 0) throw new KeysOfGoneJobs(stale);
    for (const k of keyRows) answered.set(first.get(k.key)!, jobs.get(k.job_id)!);
  }
  // An item repeating a key that an earlier request holds answers that request's job too.
  for (const [i, earlier] of sameAs) {
    const job = answered.get(earlier);
    if (job) {
      answered.set(i, job);
      sameAs.delete(i);
    }
  }
  return { ids, claimed, answered, sameAs };
}

/**
 * A key claimed for an item that a unique key answered instead (a waiting job held it: unique.ts)
 * names that job from now on, so the same request sent again answers it too. `jobOf(i)`: the job
 * item i ended as.
 */
export async function pointKeysAt(
  trx: Transaction<Database>,
  queue: string,
  items: EnqueueItem[],
  keys: ClaimedKeys,
  jobOf: (index: number) => EnqueuedRow,
): Promise<void> {
  for (const i of keys.claimed) {
    const job = jobOf(i);
    if (String(job.id) === keys.ids[i]) continue;
    await sql`UPDATE baton.idempotency_keys SET job_id = ${job.id}::bigint
              WHERE queue = ${queue} AND key = ${items[i]!.idempotencyKey!} AND job_id = ${keys.ids[i]!}::bigint`.execute(
      trx,
    );
  }
}
