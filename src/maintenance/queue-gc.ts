import { sql } from 'kysely';
import type { Db } from '../db/database.js';
import type { Metrics } from '../metrics/metrics.js';
import type { Duty } from './duty.js';

/**
 * Queue GC: auto-created queues idle for `idleMs` (no live jobs, no job finished and no settings
 * change within that time, not paused) are removed. Queues created explicitly are never removed.
 *
 * The race with a concurrent enqueue is the one that hurt production queues (docs/architecture.md,
 * "Lessons"), so each removal is two statements in one transaction, in this order:
 * 1. Lock the queue row FOR UPDATE SKIP LOCKED. An enqueue in flight holds FOR KEY SHARE on it, so
 *    a busy queue is skipped outright, and once we hold the lock no enqueue can start on it.
 * 2. Re-check emptiness and delete. Being a new statement, this one sees every job committed before
 *    we took the lock. (Checking and locking in one statement would not: its snapshot predates the
 *    lock, and a job committed in between would be missed and stranded.)
 * An enqueue that waited for our lock finds the row gone, re-creates the queue and inserts; it
 * neither fails nor loses the job.
 */

export interface QueueGcResult {
  removed: string[];
  /** Candidates that turned out busy (locked by an enqueue, or given a job) when we looked again. */
  kept: number;
}

const idleQueue = (idleMs: number) => sql`
  q.auto_created AND NOT q.paused
  AND q.updated_at < now() - ${idleMs}::bigint * interval '1 millisecond'
  AND NOT EXISTS (SELECT 1 FROM baton.jobs j WHERE j.queue = q.name AND j.state = 'ready')
  AND NOT EXISTS (SELECT 1 FROM baton.jobs j WHERE j.queue = q.name AND j.state = 'claimed')
  AND NOT EXISTS (SELECT 1 FROM baton.scheduled_jobs s WHERE s.queue = q.name)
  AND NOT EXISTS (SELECT 1 FROM baton.waiting_jobs w WHERE w.queue = q.name)
  AND NOT EXISTS (
    SELECT 1 FROM baton.job_history h
    WHERE h.queue = q.name AND h.state IN ('completed', 'dead', 'cancelled')
      AND h.finished_at > now() - ${idleMs}::bigint * interval '1 millisecond')`;

export async function collectIdleQueues(db: Db, idleMs: number, limit: number): Promise<QueueGcResult> {
  const candidates = await sql<{ name: string }>`
    SELECT q.name FROM baton.queues q WHERE ${idleQueue(idleMs)} ORDER BY q.updated_at LIMIT ${limit}`.execute(
    db,
  );
  const result: QueueGcResult = { removed: [], kept: 0 };
  for (const { name } of candidates.rows) {
    const removed = await db.transaction().execute(async (trx) => {
      const locked = await sql`
        SELECT 1 FROM baton.queues WHERE name = ${name} FOR UPDATE SKIP LOCKED`.execute(trx);
      if (locked.rows.length === 0) return false;
      const gone =
        await sql`DELETE FROM baton.queues q WHERE q.name = ${name} AND ${idleQueue(idleMs)}`.execute(trx);
      return Number(gone.numAffectedRows ?? 0) > 0;
    });
    if (removed) result.removed.push(name);
    else result.kept++;
  }
  return result;
}

export class QueueGcDuty implements Duty<QueueGcResult> {
  readonly name = 'queue_gc';
  constructor(
    private readonly db: Db,
    private readonly metrics: Metrics,
    private readonly tickMs: number,
    private readonly idleMs: number,
    private readonly batchSize = 100,
  ) {}

  async runOnce(): Promise<QueueGcResult> {
    const result = await collectIdleQueues(this.db, this.idleMs, this.batchSize);
    this.metrics.queuesCollected.inc(result.removed.length);
    return result;
  }

  nextRunInMs(): number {
    return this.tickMs;
  }
}
