import { type RawBuilder, sql } from 'kysely';
import type { Db } from '../db/database.js';
import { isLockTimeout } from '../db/errors.js';
import type { Metrics } from '../metrics/metrics.js';
import type { QueueDefaults } from '../queues/queue-settings.js';
import { type Duty, MAINTENANCE_BATCH } from './duty.js';

/**
 * Prune: finished jobs past their retention leave job_history, in bounded batches, oldest first.
 * Retention is per queue and state (completed and cancelled use the completed retention, dead its
 * own), falling back to the server defaults, and read at prune time, so a changed setting applies
 * to jobs that finished before the change too. A job whose idempotency key is still live is kept,
 * so a repeated key always finds its job; the keys of pruned jobs go with them.
 *
 * One attempt is one transaction under a short lock_timeout, because prune must never queue up
 * behind (and then in front of) the workload's locks. A lock timeout in ANY statement of the
 * attempt rolls the whole attempt back and is reported as `blocked`, an outcome rather than an
 * error: nothing is half-done, and the next attempt (after a backoff) starts clean. The job rows
 * themselves are taken FOR UPDATE SKIP LOCKED, so a second leader's prune simply skips them.
 *
 * Most rows never come here: history is partitioned by the day jobs finished
 * (migrations/0014_history_partitions.ts), and a day whose rows are all past retention is emptied
 * whole by the history-partitions duty (history-partitions.ts). Row DELETEs cost far more time and
 * WAL than emptying a day (then a VACUUM too: docs/adr/0001-history-partitions.md, docs/benchmarks.md,
 * "Pruning history"). So this leaves alone every row in a day that duty will empty within a day: the days
 * before `date_trunc('day', now() + 1 day - longest retention)` of its class (completed and
 * cancelled share one retention, dead has its own), the longest over the queues present. What it
 * still deletes are the rows of queues whose retention is shorter than the longest, in the newer
 * days held for the others (docs/adr/0001-history-partitions.md). A finished job therefore stays at
 * least its retention and at most a day longer.
 */

export type PruneOutcome = 'pruned' | 'noop' | 'blocked';
export interface PruneResult {
  outcome: PruneOutcome;
  pruned: number;
}

export interface PruneOptions {
  batchSize: number;
  lockTimeoutMs: number;
  defaults: Pick<QueueDefaults, 'completedRetentionMs' | 'deadRetentionMs'>;
}

/**
 * The retention of rows of `state` (a column or literal) of the queue whose baton.queues row is `q`
 * (NULL when the queue was collected: the defaults). Shared with the history-partitions duty.
 */
export function retentionMs(
  state: RawBuilder<unknown>,
  q: string,
  defaults: Pick<QueueDefaults, 'completedRetentionMs' | 'deadRetentionMs'>,
) {
  const queue = sql.table(q);
  return sql`CASE WHEN ${state} = 'dead'
                THEN coalesce(${queue}.dead_retention_ms, ${defaults.deadRetentionMs}::bigint)
                ELSE coalesce(${queue}.completed_retention_ms, ${defaults.completedRetentionMs}::bigint)
           END`;
}

export async function pruneFinishedJobs(db: Db, opts: PruneOptions): Promise<PruneResult> {
  try {
    return await db.transaction().execute(async (trx) => {
      await sql`SELECT set_config('lock_timeout', ${`${opts.lockTimeoutMs}ms`}, true)`.execute(trx);
      // The distinct queues present in history, by a loose index scan (one probe per queue), joined
      // to their settings; queues already collected fall back to the defaults.
      const { rows } = await sql<{ id: string; queue: string }>`
        WITH RECURSIVE present AS (
          (SELECT queue FROM baton.job_history ORDER BY queue LIMIT 1)
          UNION ALL
          SELECT (SELECT h.queue FROM baton.job_history h WHERE h.queue > p.queue ORDER BY h.queue LIMIT 1)
          FROM present p WHERE p.queue IS NOT NULL
        ), targets AS (
          SELECT p.queue, s.state, ${retentionMs(sql`s.state`, 'q', opts.defaults)} AS retention_ms
          FROM present p
          LEFT JOIN baton.queues q ON q.name = p.queue
          CROSS JOIN (VALUES ('completed'), ('cancelled'), ('dead')) AS s(state)
          WHERE p.queue IS NOT NULL
        ), classes AS (
          -- The longest retention of each partition class: days before the horizon are the
          -- history-partitions duty's, emptied whole.
          SELECT t.*, date_trunc('day', now() + interval '1 day'
                        - max(t.retention_ms) OVER (PARTITION BY t.state = 'dead') * interval '1 millisecond', 'UTC')
                      AS horizon
          FROM targets t
        ), doomed AS (
          SELECT d.id FROM classes t
          CROSS JOIN LATERAL (
            SELECT h.id FROM baton.job_history h
            WHERE h.queue = t.queue AND h.state = t.state
              AND h.finished_at < now() - t.retention_ms * interval '1 millisecond'
              AND h.finished_at >= t.horizon
              AND NOT EXISTS (
                SELECT 1 FROM baton.idempotency_keys k
                WHERE k.queue = h.queue AND k.key = h.idempotency_key AND k.job_id = h.id AND k.expires_at > now())
            ORDER BY h.finished_at
            LIMIT ${opts.batchSize}
            FOR UPDATE SKIP LOCKED
          ) d
          LIMIT ${opts.batchSize}
        )
        DELETE FROM baton.job_history h USING doomed WHERE h.id = doomed.id
        RETURNING h.id, h.queue`.execute(trx);
      if (rows.length === 0) return { outcome: 'noop' as const, pruned: 0 };
      await sql`
        DELETE FROM baton.idempotency_keys k
        USING unnest(${rows.map((r) => r.queue)}::text[], ${rows.map((r) => r.id)}::bigint[]) AS p(queue, id)
        WHERE k.queue = p.queue AND k.job_id = p.id`.execute(trx);
      return { outcome: 'pruned' as const, pruned: rows.length };
    });
  } catch (err) {
    if (isLockTimeout(err)) return { outcome: 'blocked', pruned: 0 };
    throw err;
  }
}

export class PruneDuty implements Duty<PruneResult> {
  readonly name = 'prune';
  private blockedStreak = 0;

  constructor(
    private readonly db: Db,
    private readonly metrics: Metrics,
    private readonly tickMs: number,
    private readonly options: Omit<PruneOptions, 'batchSize'> & { batchSize?: number },
  ) {}

  async runOnce(): Promise<PruneResult> {
    let result: PruneResult;
    try {
      result = await pruneFinishedJobs(this.db, { batchSize: MAINTENANCE_BATCH, ...this.options });
    } catch (err) {
      this.metrics.prune.inc({ outcome: 'error' });
      throw err;
    }
    this.metrics.prune.inc({ outcome: result.outcome });
    this.metrics.jobsPruned.inc(result.pruned);
    this.blockedStreak = result.outcome === 'blocked' ? this.blockedStreak + 1 : 0;
    return result;
  }

  /** Full batch: go again at once. Blocked: back off 2, 4, then 8 ticks. */
  nextRunInMs(last: PruneResult | undefined): number {
    if (last?.outcome === 'pruned' && last.pruned >= (this.options.batchSize ?? MAINTENANCE_BATCH)) return 0;
    if (last?.outcome === 'blocked') return this.tickMs * 2 ** Math.min(this.blockedStreak, 3);
    return this.tickMs;
  }
}
