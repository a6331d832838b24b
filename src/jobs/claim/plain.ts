import { type RawBuilder, sql } from 'kysely';
import { lockReady, type PickPlan, Signal } from './statement.js';

/**
 * The pick of a queue without flow control: its first ready jobs in claim order, straight off the
 * ready index. A queue under flow control (`flow`, from the settings CTE) stops it before it reads the
 * index, and the statement diverts the claim to the grouped one (claim.ts). So a queue without flow
 * control pays one boolean for it.
 */
export function plainPick(queue: string, total: number): PickPlan {
  return {
    pick: lockReady({ queue: sql`${queue}`, where: notDiverted, limit: sql.lit(total) }),
    signal: divertSignal,
  };
}

/**
 * The same pick from a floor (floors.ts): the queue's jobs of priority `priority` from `runAt` on,
 * then, only if those are too few, its jobs of lower priorities. Each part is a range of
 * jobs_ready_idx (queue, priority DESC, run_at, id): `priority = p AND run_at >= r` and
 * `priority < p` are where its scan starts, not filters on what it reads, so the dead entries before
 * the floor are never read. The outer LIMIT stops the Append once the first part has enough, so the
 * second part costs nothing then. FOR UPDATE may not stand in a UNION's branch, hence a subquery
 * around each. The first part's rows all sort before the second's, so the pick stays in claim order.
 */
export function plainPickFrom(
  queue: string,
  total: number,
  priority: RawBuilder<unknown>,
  runAt: RawBuilder<unknown>,
): PickPlan {
  const limit = sql.lit(total);
  const part = (range: RawBuilder<unknown>) =>
    lockReady({ queue: sql`${queue}`, where: sql`${notDiverted} AND ${range}`, limit });
  return {
    pick: sql`
    SELECT * FROM (
      SELECT * FROM (${part(sql`j.priority = ${priority}::integer AND j.run_at >= ${runAt}::timestamptz`)}) at_floor
      UNION ALL
      SELECT * FROM (${part(sql`j.priority < ${priority}::integer`)}) below_floor
    ) from_floor
    LIMIT ${limit}`,
    signal: divertSignal,
  };
}

const notDiverted = sql`NOT (SELECT paused OR flow FROM settings)`;

const divertSignal = sql`CASE WHEN flow AND NOT EXISTS (SELECT 1 FROM claimed) THEN ${sql.lit(Signal.divert)} END`;
