import { sql, type Transaction } from 'kysely';
import type { Db } from '../db/database.js';
import { queueVisible } from '../db/queue-patterns.js';
import type { Database } from '../db/schema.js';
import { DomainError, invalidField } from '../errors.js';
import {
  type EnqueueOptions,
  type EnqueueResult,
  holdOrCreateQueue,
  insertJobs,
  QUEUE_MISSING,
} from './enqueue.js';
import type { EnqueueItem, ParentFailurePolicy, ParentRef } from './enqueue-item.js';
import type { EnqueuedRow } from './job-row.js';
import { getJobs } from './read.js';
import { resolveUniqueKeys } from './unique.js';

/**
 * Enqueue jobs that wait for others (`depends_on`), in one transaction (docs/adr/0002-job-dependencies.md).
 *
 * Only requests naming parents come here: a plain enqueue keeps its one statement. In the transaction:
 * 1. Hold the queue row (FOR KEY SHARE, as every enqueue does) and draw an id per item, in request order.
 * 2. Hold every parent named by id: `UPDATE ... SET dependents = true` on its live row (ring, scheduled or
 *    waiting), which locks it to our commit. A parent's finish (ack, nack to dead, cancel, ...) that
 *    comes after waits for our lock and then re-reads the row, so it sees the flag and releases the
 *    edges we are about to write; one that came before is in job_history, read by the next statement's
 *    fresh snapshot: completed (the dependency is met) or failed (the policy applies at once). A parent
 *    that moved between tables meanwhile is held again; one found nowhere is a 400 naming the field.
 *    The update is scoped to the queues the caller may see (a queue-limited key's patterns, in SQL).
 * 3. Per item, in order (a batch item may only name earlier items, so no cycle can be written): its
 *    parents' outcomes so far. A failed parent under `cancel`: the job is cancelled at once (reason
 *    `parent_failed`; a redrive of the parent brings it back). Else, parents still live: the job waits
 *    in baton.waiting_jobs with `pending` = how many. Else it is enqueued as any job is (insertJobs).
 * 4. Write one edge per (child, parent), resolved already for parents that had finished.
 * From then on the parents' finishes move the children (the trigger on job_history, migration 0016).
 */

/** A request's parents as the caller may see them: a queue-limited key's patterns (null: every queue). */
export type ParentScope = readonly string[] | undefined;

type Outcome = 'completed' | 'dead' | 'cancelled' | null;
interface Parent {
  queue: string;
  /** The parent's finished state, or null while it is live. */
  outcome: Outcome;
}

/** How many times the transaction runs again after a deadlock or a row moved by the ring. */
const ATTEMPTS = 5;

export async function enqueueWithParents(
  db: Db,
  queue: string,
  given: EnqueueItem[],
  opts: EnqueueOptions,
  scope: ParentScope,
  field: (index: number) => string,
): Promise<EnqueueResult[]> {
  for (let attempt = 1; ; attempt++) {
    try {
      // A copy per attempt: a unique key's `replace` rewrites an item's data (enqueueInOrder).
      const items = [...given];
      return await db.transaction().execute((trx) => enqueueInOrder(trx, queue, items, opts, scope, field));
    } catch (err) {
      // Two requests holding the same parents in another order, or a parent the ring carried to
      // another slot while we held it: the transaction did nothing, so it runs again.
      const code = (err as { code?: string }).code;
      if (attempt < ATTEMPTS && (code === '40P01' || code === '40001')) continue;
      throw err;
    }
  }
}

async function enqueueInOrder(
  trx: Transaction<Database>,
  queue: string,
  items: EnqueueItem[],
  opts: EnqueueOptions,
  scope: ParentScope,
  field: (index: number) => string,
): Promise<EnqueueResult[]> {
  await holdOrCreateQueue(trx, queue, opts);
  const { rows: drawn } = await sql<{ id: string }>`
    SELECT nextval('baton.jobs_id_seq')::text AS id FROM generate_series(1, ${items.length}::integer)`.execute(
    trx,
  );
  const ids = drawn.map((r) => r.id);
  const { answered, sameAs } = await claimIdempotencyKeys(
    trx,
    queue,
    items,
    ids,
    opts.idempotencyRetentionMs,
  );
  // Unique keys of the items still new, under the key rows' locks (unique.ts): a key a waiting job
  // holds answers that job (`replace` gives it this item's payload, priority and run_at); a new job
  // takes the key, a job waiting for parents included (it holds it as a scheduled job would).
  const unique = items.flatMap((item, i) =>
    item.uniqueKey !== undefined && !answered.has(i) && !sameAs.has(i) ? [i] : [],
  );
  if (unique.length > 0) {
    const decisions = await resolveUniqueKeys(
      trx,
      queue,
      unique.map((i) => items[i]!),
      unique.map((i) => ids[i]!),
    );
    decisions.forEach((d, k) => {
      const i = unique[k]!;
      if (d === undefined) return;
      if ('job' in d) answered.set(i, d.job);
      else if ('sameAs' in d) sameAs.set(i, unique[d.sameAs]!);
      else items[i] = d.insert;
    });
  }
  // An item answered by the job of its idempotency key stands, as a parent, for that job (a job by id);
  // one repeating a key of an earlier item, for that item.
  const parentRef = (ref: ParentRef): ParentRef => {
    if ('id' in ref) return ref;
    const item = sameAs.get(ref.item) ?? ref.item;
    const job = answered.get(item);
    return job ? { id: String(job.id) } : { item };
  };
  const newItem = (i: number) => !answered.has(i) && !sameAs.has(i);

  const named = [
    ...new Set(
      items.flatMap((item, i) =>
        newItem(i) ? (item.dependsOn ?? []).map(parentRef).flatMap((p) => ('id' in p ? [p.id] : [])) : [],
      ),
    ),
  ];
  const parents = await holdParents(trx, named, scope);
  items.forEach((item, i) => {
    if (!newItem(i)) return;
    for (const [k, p] of (item.dependsOn ?? []).map(parentRef).entries()) {
      if ('id' in p && !parents.has(p.id)) {
        throw invalidField(`${field(i)}depends_on[${k}]`, `names job ${p.id}, which does not exist`);
      }
    }
  });

  // Per item: its parents (deduplicated) with their outcomes, and what becomes of it.
  const disposition: ('run' | 'waiting' | 'cancelled' | 'answered')[] = [];
  const edges: EdgeRow[] = [];
  const counts: { pending: number; failed: number }[] = [];
  const referenced = new Set<number>();
  items.forEach((item, i) => {
    if (!newItem(i)) {
      disposition.push('answered');
      counts.push({ pending: 0, failed: 0 });
      return;
    }
    const policy: ParentFailurePolicy = item.onParentFailure ?? 'cancel';
    const seen = new Set<string>();
    let pending = 0;
    let failed = 0;
    for (const ref of (item.dependsOn ?? []).map(parentRef)) {
      let parent: Parent;
      let parentId: string;
      if ('id' in ref) {
        parentId = ref.id;
        parent = parents.get(ref.id)!;
      } else {
        parentId = ids[ref.item]!;
        referenced.add(ref.item);
        parent = { queue, outcome: disposition[ref.item] === 'cancelled' ? 'cancelled' : null };
      }
      if (seen.has(parentId)) continue;
      seen.add(parentId);
      if (parent.outcome === null) pending++;
      else if (parent.outcome !== 'completed') failed++;
      edges.push({
        child: ids[i]!,
        parent: parentId,
        child_queue: queue,
        parent_queue: parent.queue,
        on_parent_failure: policy,
        parent_outcome: parent.outcome,
      });
    }
    counts.push({ pending, failed });
    disposition.push(failed > 0 && policy === 'cancel' ? 'cancelled' : pending > 0 ? 'waiting' : 'run');
  });

  const pick = (what: 'run' | 'waiting' | 'cancelled') =>
    items.flatMap((_, i) => (disposition[i] === what ? [i] : []));
  const results = new Map<number, EnqueuedRow>();

  const run = pick('run');
  if (run.length > 0) {
    const rows = await insertJobs(
      trx,
      queue,
      run.map((i) => items[i]!),
      run.map((i) => ids[i]!),
      opts.defaultMaxAttempts,
    );
    if (rows === QUEUE_MISSING) throw new Error(`queue ${queue} vanished while its row was held`);
    for (const [k, i] of run.entries()) results.set(i, rows[k]!);
    // Parents enqueued by this request: flagged here, before any child of theirs can be released,
    // since nobody sees them before the commit.
    const flagged = run.filter((i) => referenced.has(i)).map((i) => ids[i]!);
    if (flagged.length > 0) {
      await sql`
        WITH ring AS (UPDATE baton.jobs SET dependents = true WHERE id = ANY(${flagged}::bigint[]))
        UPDATE baton.scheduled_jobs SET dependents = true WHERE id = ANY(${flagged}::bigint[])`.execute(trx);
    }
  }

  const waiting = pick('waiting');
  if (waiting.length > 0) {
    const text = `[${waiting
      .map((i) => waitingJson(items[i]!, ids[i]!, counts[i]!, referenced.has(i)))
      .join(',')}]`;
    const { rows } = await sql<EnqueuedRow>`
      WITH q AS (
        SELECT name, max_attempts FROM baton.queues WHERE name = ${queue}
      ), mark_grouped AS (
        -- As enqueue's: a job with a group makes its queue grouped now, before it is ever claimable.
        UPDATE baton.queues SET grouped = true
        WHERE name = (SELECT name FROM baton.queues
                      WHERE name = ${queue} AND NOT grouped
                        AND ${waiting.some((i) => items[i]!.group !== undefined)}::boolean
                      FOR NO KEY UPDATE SKIP LOCKED)
      )
      INSERT INTO baton.waiting_jobs (id, queue, group_key, priority, run_at, max_attempts, payload, meta,
                                      timeout_ms, expires_at, idempotency_key, unique_key, dependents, pending,
                                      parents_failed, on_parent_failure)
      SELECT m.id, q.name, coalesce(m.group_key, ''), coalesce(m.priority, 0),
             coalesce(m.run_at, now() + coalesce(m.delay_ms, 0) * interval '1 millisecond'),
             coalesce(m.max_attempts, q.max_attempts, ${opts.defaultMaxAttempts}::integer),
             coalesce(m.payload, 'null'::jsonb), m.meta, m.timeout_ms,
             coalesce(m.expires_at, now() + m.expires_in_ms * interval '1 millisecond'),
             m.idempotency_key, m.unique_key, m.dependents, m.pending, m.parents_failed, m.on_parent_failure
      FROM jsonb_to_recordset(${text}::jsonb) AS m(
             payload jsonb, id bigint, priority integer, delay_ms bigint, run_at timestamptz, max_attempts integer,
             group_key text, meta jsonb, timeout_ms integer, expires_at timestamptz, expires_in_ms bigint,
             idempotency_key text, unique_key text, dependents boolean, pending integer, parents_failed integer,
             on_parent_failure text)
      CROSS JOIN q
      RETURNING id, queue, group_key, 'waiting'::text AS state, priority, run_at, attempts, max_attempts,
                idempotency_key, created_at, timeout_ms, expires_at, unique_key`.execute(trx);
    const byId = new Map(rows.map((r) => [String(r.id), r]));
    for (const i of waiting) results.set(i, byId.get(ids[i]!)!);
  }

  const cancelled = pick('cancelled');
  if (cancelled.length > 0) {
    const text = `[${cancelled.map((i) => waitingJson(items[i]!, ids[i]!, counts[i]!, false)).join(',')}]`;
    // Filed as cancelled at once, unflagged: their children in this request are decided above, and a
    // redrive of the failed parent finds them through their edges (baton.parents_redriven).
    const { rows } = await sql<EnqueuedRow>`
      WITH q AS (SELECT name, max_attempts FROM baton.queues WHERE name = ${queue})
      INSERT INTO baton.job_history (id, queue, group_key, state, priority, run_at, attempts, max_attempts,
                                     created_at, finished_at, last_error, errors, payload, meta, timeout_ms,
                                     expires_at, idempotency_key, unique_key, dependents)
      SELECT m.id, q.name, coalesce(m.group_key, ''), 'cancelled', coalesce(m.priority, 0),
             coalesce(m.run_at, now() + coalesce(m.delay_ms, 0) * interval '1 millisecond'), 0,
             coalesce(m.max_attempts, q.max_attempts, ${opts.defaultMaxAttempts}::integer), now(), now(),
             jsonb_build_object('reason', 'parent_failed', 'attempt', 0,
                                'at', to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
                                'message', 'a parent failed and the policy is to cancel'),
             '[]'::jsonb, coalesce(m.payload, 'null'::jsonb), m.meta, m.timeout_ms,
             coalesce(m.expires_at, now() + m.expires_in_ms * interval '1 millisecond'), m.idempotency_key,
             m.unique_key, false
      FROM jsonb_to_recordset(${text}::jsonb) AS m(
             payload jsonb, id bigint, priority integer, delay_ms bigint, run_at timestamptz, max_attempts integer,
             group_key text, meta jsonb, timeout_ms integer, expires_at timestamptz, expires_in_ms bigint,
             idempotency_key text, unique_key text)
      CROSS JOIN q
      RETURNING id, queue, group_key, state, priority, run_at, attempts, max_attempts,
                idempotency_key, created_at, timeout_ms, expires_at, unique_key`.execute(trx);
    const byId = new Map(rows.map((r) => [String(r.id), r]));
    for (const i of cancelled) results.set(i, byId.get(ids[i]!)!);
  }

  if (edges.length > 0) {
    await sql`
      INSERT INTO baton.job_edges (child, parent, child_queue, parent_queue, on_parent_failure, parent_outcome)
      SELECT child, parent, child_queue, parent_queue, on_parent_failure, parent_outcome
      FROM jsonb_to_recordset(${JSON.stringify(edges)}::jsonb) AS e(
             child bigint, parent bigint, child_queue text, parent_queue text, on_parent_failure text,
             parent_outcome text)`.execute(trx);
  }
  return items.map((_, i) => {
    const job = answered.get(i);
    if (job) return { job, created: false };
    const first = sameAs.get(i);
    return first === undefined
      ? { job: results.get(i)!, created: true }
      : { job: results.get(first)!, created: false };
  });
}

/**
 * Idempotency keys of a request with parents, in its transaction, as enqueue.ts's insertWithKeys
 * claims them: in sorted key order (two requests sharing keys cannot deadlock), each under the id of
 * the first item carrying it; a key still held (not expired) answers its job instead, and a request
 * sent again with the same keys creates nothing. `answered`: items whose key an earlier request holds,
 * with its job; `sameAs`: items repeating a key of an earlier item of this request, with that item.
 */
async function claimIdempotencyKeys(
  trx: Transaction<Database>,
  queue: string,
  items: EnqueueItem[],
  ids: string[],
  retentionMs: number,
): Promise<{ answered: Map<number, EnqueuedRow>; sameAs: Map<number, number> }> {
  const answered = new Map<number, EnqueuedRow>();
  const sameAs = new Map<number, number>();
  const first = new Map<string, number>();
  items.forEach((item, i) => {
    const key = item.idempotencyKey;
    if (key === undefined) return;
    const earlier = first.get(key);
    if (earlier === undefined) first.set(key, i);
    else sameAs.set(i, earlier);
  });
  if (first.size === 0) return { answered, sameAs };
  const keys = [...first]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([key, i]) => ({ key, job_id: ids[i] }));
  const { rows: claimed } = await sql<{ key: string }>`
    INSERT INTO baton.idempotency_keys AS k (queue, key, job_id, expires_at)
    SELECT ${queue}, t.key, t.job_id, now() + ${retentionMs}::bigint * interval '1 millisecond'
    FROM jsonb_to_recordset(${JSON.stringify(keys)}::jsonb) AS t(key text, job_id bigint)
    ORDER BY t.key
    ON CONFLICT (queue, key) DO UPDATE SET job_id = excluded.job_id, expires_at = excluded.expires_at
      WHERE k.expires_at <= now()
    RETURNING key`.execute(trx);
  const taken = new Set(claimed.map((r) => r.key));
  const held = [...first.keys()].filter((key) => !taken.has(key));
  if (held.length === 0) return { answered, sameAs };
  const { rows } = await sql<{ key: string; job_id: string }>`
    SELECT key, job_id::text FROM baton.idempotency_keys WHERE queue = ${queue} AND key = ANY(${held}::text[])`.execute(
    trx,
  );
  const jobs = await getJobs(
    trx,
    rows.map((r) => r.job_id),
  );
  for (const { key, job_id } of rows) {
    const job = jobs.get(job_id);
    // The key outlived its job (a retention of keys longer than of jobs): nothing to answer with.
    if (!job)
      throw new DomainError('invalid_state', `idempotency_key "${key}" names job ${job_id}, which is gone`);
    answered.set(first.get(key)!, job);
  }
  // Items repeating a key that an earlier request holds answer that request's job too.
  for (const [i, earlier] of sameAs) {
    const job = answered.get(earlier);
    if (job) {
      answered.set(i, job);
      sameAs.delete(i);
    }
  }
  return { answered, sameAs };
}

interface EdgeRow {
  child: string;
  parent: string;
  child_queue: string;
  parent_queue: string;
  on_parent_failure: ParentFailurePolicy;
  parent_outcome: Outcome;
}

/** One waiting (or at once cancelled) item as its insert reads it: the payload spliced in as its text. */
function waitingJson(
  item: EnqueueItem,
  id: string,
  counts: { pending: number; failed: number },
  dependents: boolean,
): string {
  const fields: Record<string, unknown> = {
    id,
    priority: item.priority,
    delay_ms: item.delayMs,
    run_at: item.runAt,
    max_attempts: item.maxAttempts,
    group_key: item.group,
    meta: item.meta,
    timeout_ms: item.timeoutMs,
    expires_at: item.expiresAt,
    expires_in_ms: item.expiresInMs,
    idempotency_key: item.idempotencyKey,
    unique_key: item.uniqueKey,
    dependents,
    pending: counts.pending,
    parents_failed: counts.failed,
    on_parent_failure: item.onParentFailure ?? 'cancel',
  };
  let text = `{"payload":${item.payloadJson}`;
  for (const [name, value] of Object.entries(fields)) {
    if (value !== undefined && value !== null) text += `,"${name}":${JSON.stringify(value)}`;
  }
  return `${text}}`;
}

/** `<alias>.queue` is one the caller may see. */
const visible = (alias: string, scope: ParentScope) => queueVisible(`${alias}.queue`, scope);

/**
 * Hold each parent named by id (step 2 above): flag and lock its live row, else read its finished
 * state. Parents the caller may not see, or that do not exist, are absent from the answer.
 */
async function holdParents(
  trx: Transaction<Database>,
  named: string[],
  scope: ParentScope,
): Promise<Map<string, Parent>> {
  const found = new Map<string, Parent>();
  let left = [...named].sort((a, b) => a.length - b.length || (a < b ? -1 : a > b ? 1 : 0));
  for (let round = 0; round < ATTEMPTS && left.length > 0; round++) {
    const { rows: held } = await sql<{ id: string; queue: string }>`
      WITH ring AS (
        UPDATE baton.jobs j SET dependents = true
        WHERE j.id = ANY(${left}::bigint[]) AND ${visible('j', scope)} RETURNING j.id, j.queue
      ), later AS (
        UPDATE baton.scheduled_jobs s SET dependents = true
        WHERE s.id = ANY(${left}::bigint[]) AND ${visible('s', scope)} RETURNING s.id, s.queue
      ), waiting AS (
        UPDATE baton.waiting_jobs w SET dependents = true
        WHERE w.id = ANY(${left}::bigint[]) AND ${visible('w', scope)} RETURNING w.id, w.queue
      )
      SELECT id::text, queue FROM ring UNION ALL SELECT id::text, queue FROM later
      UNION ALL SELECT id::text, queue FROM waiting`.execute(trx);
    for (const row of held) found.set(row.id, { queue: row.queue, outcome: null });
    left = left.filter((id) => !found.has(id));
    if (left.length === 0) break;
    // A new statement, a new snapshot: a parent that finished while we waited for its row is in history
    // now; one that moved between live tables (promoted, retried later) is held again next round.
    const { rows: seen } = await sql<{ id: string; queue: string; state: string }>`
      SELECT h.id::text, h.queue, h.state FROM baton.job_history h
      WHERE h.id = ANY(${left}::bigint[]) AND ${visible('h', scope)}
      UNION ALL SELECT j.id::text, j.queue, 'live' FROM baton.jobs j WHERE j.id = ANY(${left}::bigint[]) AND ${visible('j', scope)}
      UNION ALL SELECT s.id::text, s.queue, 'live' FROM baton.scheduled_jobs s
                WHERE s.id = ANY(${left}::bigint[]) AND ${visible('s', scope)}
      UNION ALL SELECT w.id::text, w.queue, 'live' FROM baton.waiting_jobs w
                WHERE w.id = ANY(${left}::bigint[]) AND ${visible('w', scope)}`.execute(trx);
    for (const row of seen) {
      if (row.state !== 'live') found.set(row.id, { queue: row.queue, outcome: row.state as Outcome });
    }
    const moved = new Set(seen.filter((r) => r.state === 'live').map((r) => r.id));
    left = left.filter((id) => moved.has(id) && !found.has(id));
  }
  return found;
}
