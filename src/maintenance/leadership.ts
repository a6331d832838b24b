import { sql } from 'kysely';
import type { Db } from '../db/database.js';

/**
 * Who runs maintenance: one replica at a time, the holder of a lease row in baton.leader.
 *
 * Why a lease row and not an advisory lock on a dedicated session: a session lock needs one
 * connection held open for as long as we lead, which a transaction-mode pooler (PgBouncer) cannot
 * give us, and it lingers for as long as the TCP connection does after a network partition. A lease
 * row works through any pooler, expires by the database clock however the leader died, and costs
 * one small UPDATE per election interval.
 *
 * Timing (T = the maintenance tick): every replica calls tryLead() every T/4, on a connection of its
 * own (plugins/database.ts: an election never queues behind the duties on the leader's pool). The
 * leader's call renews its lease to now() + T; anyone else's takes the row only once the lease has
 * expired. So a leader that dies is replaced within T (its last lease) + T/4 (the next attempt), a
 * leader that resigns (graceful shutdown) within T/4, and a live leader lets its lease lapse only
 * when a renewal comes more than 3T/4 late (a process starved of CPU that long). Each such moment
 * is measured (`gapMs` after a tryLead, the metric baton_leader_gap_seconds).

 * Two leaders at once are still possible for a moment (a leader paused longer than its lease, for
 * instance). That is harmless because every maintenance statement is guarded on its own; leadership
 * only keeps the replicas from doing the same work twice. As a courtesy, a leader stops starting
 * duties once its lease may have run out by its own clock (see `isLeader`).
 */
export class Leadership {
  private leaseValidUntil = 0;

  constructor(
    private readonly db: Db,
    readonly holder: string,
    private readonly leaseMs: number,
    private readonly name = 'maintenance',
  ) {}

  /**
   * The leaderless moment the last tryLead() ended, in ms (0 if none): for a renewal, how long our
   * own view had already run out (`lapse`); for a takeover, how long the old lease had been expired
   * in the database (`takeover`).
   */
  gap: { kind: 'lapse' | 'takeover'; ms: number } | undefined;

  /** Acquire the lease if free or expired, or renew it if ours. Returns whether we lead now. */
  async tryLead(): Promise<boolean> {
    const startedAt = Date.now();
    const validUntil = this.leaseValidUntil;
    const { rows } = await sql<{ term: string; expired_ms: number | null }>`
      WITH prior AS (SELECT holder, expires_at FROM baton.leader WHERE name = ${this.name})
      INSERT INTO baton.leader AS l (name, holder, expires_at)
      VALUES (${this.name}, ${this.holder}, now() + ${this.leaseMs}::integer * interval '1 millisecond')
      ON CONFLICT (name) DO UPDATE SET
        holder = excluded.holder,
        expires_at = excluded.expires_at,
        term = CASE WHEN l.holder = excluded.holder THEN l.term ELSE l.term + 1 END,
        acquired_at = CASE WHEN l.holder = excluded.holder THEN l.acquired_at ELSE now() END
      WHERE l.holder = excluded.holder OR l.expires_at < now()
      RETURNING term,
        (SELECT extract(epoch FROM now() - p.expires_at)::float8 * 1000 FROM prior p
         WHERE p.holder <> ${this.holder} AND p.expires_at < now()) AS expired_ms`.execute(this.db);
    const leads = rows.length > 0;
    // Measured from before the round trip, so our local view never outlasts the database's.
    this.leaseValidUntil = leads ? startedAt + this.leaseMs : 0;
    const now = Date.now();
    this.gap =
      leads && rows[0]!.expired_ms !== null
        ? { kind: 'takeover', ms: rows[0]!.expired_ms }
        : leads && validUntil > 0 && now > validUntil
          ? { kind: 'lapse', ms: now - validUntil }
          : undefined;
    return leads;
  }

  /** True while our lease is, by our own clock, certainly still valid. */
  get isLeader(): boolean {
    return Date.now() < this.leaseValidUntil;
  }

  /** Give the lease up (graceful shutdown) so another replica takes over at its next attempt. */
  async resign(): Promise<void> {
    this.leaseValidUntil = 0;
    await sql`DELETE FROM baton.leader WHERE name = ${this.name} AND holder = ${this.holder}`.execute(
      this.db,
    );
  }

  /** Forget leadership locally without touching the database (after an error). */
  demote(): void {
    this.leaseValidUntil = 0;
  }
}
