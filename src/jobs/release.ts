import { sql } from 'kysely';
import type { Db } from '../db/database.js';

/**
 * One step of releasing children (migrations/0019_bounded_release.ts, docs/adr/0004-bounded-release.md):
 * the oldest pending event of one parent (it finished, or was redriven), applied to at most `batch`
 * of its children, in one short transaction of its own. Null when no event is waiting (or every
 * waiting one is being worked on by another replica).
 */
export interface ReleaseStep {
  parent: string;
  kind: 'completed' | 'dead' | 'cancelled' | 'redriven';
  /** Edges of the parent walked by this step (up to the batch). */
  walked: number;
  /** Children whose last parent this was: now ready (or scheduled, if their run_at is ahead). */
  released: number;
  /** Children cancelled because this parent failed (their awaiters are told). */
  cancelled: string[];
  /** Children a redriven parent brought back to waiting. */
  restored: number;
  /** The parent has more edges past this step's: its event stays, its turn goes to the back. */
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
