import { sql } from 'kysely';
import type { Db } from '../db/database.js';

/**
 * One step of releasing children (migrations/0019_bounded_release.ts, docs/adr/0004-bounded-release.md):
 * pending events (a parent finished, or was redriven), oldest turn first, applied until `batch`
 * children have been walked, in one short transaction of its own. Null when no event is waiting (or
 * every waiting one is being worked on by another replica).
 */
export interface ReleaseStep {
  /** Parent events applied (in full, or the last one in part). */
  events: number;
  /** Edges walked (up to the batch). */
  walked: number;
  /** Children whose last parent finished: now ready (or scheduled, if their run_at is ahead). */
  released: number;
  /** Children cancelled because a parent failed (their awaiters are told). */
  cancelled: string[];
  /** Children a redriven parent brought back to waiting. */
  restored: number;
  /** The last event has more edges past this step's: it stays, its turn goes to the back. */
  more: boolean;
}

export async function releaseStep(db: Db, batch: number): Promise<ReleaseStep | null> {
  const { rows } = await sql<{
    step: ReleaseStep | null;
  }>`SELECT baton.release_step(${batch}::integer) AS step`.execute(db);
  return rows[0]?.step ?? null;
}

/** Is any release waiting? A plain read (no lock): an event another replica works on counts. */
export async function releasesPending(db: Db): Promise<boolean> {
  const { rows } = await sql`SELECT 1 FROM baton.parent_events LIMIT 1`.execute(db);
  return rows.length > 0;
}
