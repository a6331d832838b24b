import { sql } from 'kysely';
import type { Db } from '../db/database.js';
import type { ClaimFloor } from '../jobs/claim/floors.js';
import type { Metrics } from '../metrics/metrics.js';
import type { Duty } from './duty.js';

/**
 * Claim floors (jobs/claim/floors.ts, docs/adr/0013-claims-under-readers.md): while readers of the
 * job table keep the ring from being truncated (`pinned`, from the ring duty), walk each queue's
 * ready index from its head once per pass, find its first ready job, and publish its key less
 * FLOOR_SLACK to every replica; their plain claims start there instead of stepping over every dead
 * entry the readers keep. One walk per queue per pass on the leader, instead of one per claim.
 *
 * The slack covers the jobs that commit just after the walk with a slightly earlier key: an enqueue
 * whose transaction began before the one that committed first, a scheduled job promoted a moment
 * late. A queue without a ready job gets the floor (0, the walk's start less the slack): new jobs of
 * the default priority come after it. Anything else made ready before a floor (a higher priority, a
 * give-back that keeps its place) waits for the next pass, which lowers the floor to it.
 *
 * Queues under flow control are left out: their claims do not take the plain statement. A pass
 * covers at most MAX_QUEUES queues, by name.
 */

/** How far before the first ready job a floor lies. */
const FLOOR_SLACK = "interval '1 second'";
const MAX_QUEUES = 1000;
/** A floor lasts this many passes (at least MIN_TTL_MS), so one late pass does not drop it. */
const TTL_PASSES = 4;
const MIN_TTL_MS = 2_000;

export interface ClaimFloorsResult {
  /** Queues given a floor this pass (0 when the ring is not pinned). */
  published: number;
  /** How long the walk took, ms. */
  walkMs: number;
}

/** Each queue's floor: the key of its first ready job less the slack, or (0, now less the slack). */
export async function claimFloorsOf(db: Db): Promise<Record<string, ClaimFloor>> {
  const { rows } = await claimFloorsQuery().execute(db);
  return Object.fromEntries(rows.map((r) => [r.queue, { priority: r.priority, runAt: r.run_at }]));
}

/** The walk of claimFloorsOf (benchmarks EXPLAIN it). */
export function claimFloorsQuery() {
  return sql<{ queue: string; priority: number; run_at: string }>`
    SELECT q.name AS queue, coalesce(f.priority, 0) AS priority,
           (coalesce(f.run_at, now()) - ${sql.raw(FLOOR_SLACK)})::text AS run_at
    FROM (SELECT name FROM baton.queues
          WHERE NOT grouped AND concurrency_limit IS NULL AND rate_limit IS NULL
            AND group_concurrency_limit IS NULL AND group_rate_limit IS NULL
          ORDER BY name LIMIT ${MAX_QUEUES}) q
    LEFT JOIN LATERAL (
      -- Every ready job, expired or not: a floor may lie lower than needed, never higher.
      SELECT j.priority, j.run_at FROM baton.jobs j
      WHERE j.queue = q.name AND j.state = 'ready'
      ORDER BY j.priority DESC, j.run_at, j.id
      LIMIT 1
    ) f ON true`;
}

export class ClaimFloorsDuty implements Duty<ClaimFloorsResult> {
  readonly name = 'claim_floors';

  constructor(
    private readonly db: Db,
    private readonly metrics: Metrics,
    /** Whether readers keep the ring from being truncated now (RingDuty.pinned). */
    private readonly pinned: () => boolean,
    /** Puts the floors in force on every replica for `ttlMs` (Notifier.publishFloors). */
    private readonly publish: (floors: Record<string, ClaimFloor>, ttlMs: number) => void,
    private readonly intervalMs: number,
  ) {}

  async runOnce(): Promise<ClaimFloorsResult> {
    if (!this.pinned()) return { published: 0, walkMs: 0 };
    const started = performance.now();
    const floors = await claimFloorsOf(this.db);
    const walkMs = performance.now() - started;
    this.publish(floors, Math.max(MIN_TTL_MS, TTL_PASSES * Math.max(this.intervalMs, walkMs)));
    const published = Object.keys(floors).length;
    this.metrics.claimFloorWalks.inc();
    return { published, walkMs };
  }

  /** The next pass after the interval, and never sooner than the walk took: it is at most half the time. */
  nextRunInMs(last: ClaimFloorsResult | undefined): number {
    return Math.max(this.intervalMs, last?.walkMs ?? 0);
  }
}
