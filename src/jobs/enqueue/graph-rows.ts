import { sql, type Transaction } from 'kysely';
import type { Database } from '../../db/schema.js';
import type { EnqueuedRow } from '../job-row.js';
import { insertJobs, QUEUE_MISSING } from './enqueue.js';
import type { GraphPlan } from './graph-plan.js';
import type { EnqueueItem } from './item.js';

/**
 * The rows of a request with parents, as its plan decided (graph-plan.ts; with-parents.ts, step 4):
 * the jobs that run now through the insert every enqueue uses, the waiting ones into
 * baton.waiting_jobs, those cancelled at once straight into job_history, then one edge per (child,
 * parent). Answers the job of each item written, by index.
 */
export async function writeGraph(
  trx: Transaction<Database>,
  queue: string,
  items: EnqueueItem[],
  ids: string[],
  plan: GraphPlan,
  defaultMaxAttempts: number,
): Promise<Map<number, EnqueuedRow>> {
  const { disposition, counts, edges, referenced } = plan;
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
      defaultMaxAttempts,
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
             coalesce(m.max_attempts, q.max_attempts, ${defaultMaxAttempts}::integer),
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
             coalesce(m.max_attempts, q.max_attempts, ${defaultMaxAttempts}::integer), now(), now(),
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
  return results;
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
