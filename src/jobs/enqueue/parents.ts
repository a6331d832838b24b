import { sql, type Transaction } from 'kysely';
import { queueVisible } from '../../db/queue-patterns.js';
import type { Database } from '../../db/schema.js';

/** A request's parents as the caller may see them: a queue-limited key's patterns (null: every queue). */
export type ParentScope = readonly string[] | undefined;

/** A parent's finished state, or null while it is live. */
export type Outcome = 'completed' | 'dead' | 'cancelled' | null;

export interface Parent {
  queue: string;
  outcome: Outcome;
}

/** Rounds of holding parents that moved between live tables while they were held. */
const ROUNDS = 5;

/** `<alias>.queue` is one the caller may see. */
const visible = (alias: string, scope: ParentScope) => queueVisible(`${alias}.queue`, scope);

/**
 * Hold each parent named by id (with-parents.ts, step 2): flag and lock its live row, else read its finished
 * state. Parents the caller may not see, or that do not exist, are absent from the answer.
 */
export async function holdParents(
  trx: Transaction<Database>,
  named: string[],
  scope: ParentScope,
): Promise<Map<string, Parent>> {
  const found = new Map<string, Parent>();
  let left = [...named].sort((a, b) => a.length - b.length || (a < b ? -1 : a > b ? 1 : 0));
  for (let round = 0; round < ROUNDS && left.length > 0; round++) {
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
