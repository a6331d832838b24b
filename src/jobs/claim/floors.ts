/**
 * Claim floors: where a queue's claims start their walk of the ready index while readers of the job
 * table pin it (docs/adr/0013-claims-under-readers.md).
 *
 * A transaction that has read baton.jobs keeps every dead ready-index entry made since it began (its
 * snapshot may still see them) and keeps the leader from truncating the ring's slots (its lock), so a
 * claim from the head of the index steps over one dead entry per job claimed since. While the ring
 * cannot be truncated, the leader walks each queue's index once per pass and publishes the key of its
 * first live ready job, less a second (maintenance/claim-floors.ts); a claim then starts there
 * (plain.ts, plainPickFrom) and steps over only what was claimed since that walk.
 *
 * A floor is a promise that nothing ready sorts before it, true when the leader walked. A job made
 * ready since with an earlier place (a higher priority, a give-back that keeps its place, a late
 * promotion, a transaction open longer than the second's slack) sorts below it and is claimed once
 * the next walk has lowered the floor: within one pass, and only while the ring is pinned. A floor
 * lasts `ttlMs` from when it was heard: when the leader stops publishing (the readers ended, or the
 * leader went), claims go back to the head of the index, and a lost notice costs speed, never a job.
 */
export interface ClaimFloor {
  /** The floor's priority: jobs of this priority from `runAt` on, then every job of a lower one. */
  priority: number;
  /** A timestamptz as PostgreSQL writes it (microseconds kept), passed back as a parameter. */
  runAt: string;
}

export class ClaimFloors {
  private readonly floors = new Map<string, ClaimFloor & { until: number }>();

  /** The floors of one walk: each queue's, for `ttlMs` from now. Queues not named keep theirs. */
  set(floors: Record<string, ClaimFloor>, ttlMs: number, now = Date.now()): void {
    for (const [queue, floor] of Object.entries(floors))
      this.floors.set(queue, { priority: floor.priority, runAt: floor.runAt, until: now + ttlMs });
  }

  /** The queue's floor while it lasts. */
  get(queue: string, now = Date.now()): ClaimFloor | undefined {
    if (this.floors.size === 0) return undefined;
    const floor = this.floors.get(queue);
    if (floor === undefined) return undefined;
    if (floor.until > now) return floor;
    this.floors.delete(queue);
    return undefined;
  }

  get size(): number {
    return this.floors.size;
  }
}
