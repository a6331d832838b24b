import { sql } from 'kysely';
import { lockReady, type PickPlan, Signal } from './statement.js';

/**
 * The pick of a queue without flow control: its first ready jobs in claim order, straight off the
 * ready index. A queue under flow control (`flow`, from the settings CTE) stops it before it reads the
 * index, and the statement diverts the claim to the grouped one (claim.ts). So a queue without flow
 * control pays one boolean for it.
 */
export function plainPick(queue: string, total: number): PickPlan {
  return {
    pick: lockReady({
      queue: sql`${queue}`,
      where: sql`NOT (SELECT paused OR flow FROM settings)`,
      limit: sql.lit(total),
    }),
    signal: sql`CASE WHEN flow AND NOT EXISTS (SELECT 1 FROM claimed) THEN ${sql.lit(Signal.divert)} END`,
  };
}
