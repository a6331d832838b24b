import { sql } from 'kysely';
import { lockReady, type PickPlan, Signal } from './statement.js';

/**
 * The claim of a queue with limits (or group overrides) whose ready jobs need no walk of the groups:
 * one statement, like a claim without limits (statement.ts wraps this pick in its claim;
 * docs/adr/0008-claim-statements.md).
 *
 * Its first CTE, `budget`, calls baton.flow_budget (migrations/0011_flow_budget.ts): the queue's flow
 * lock, then, each read with a snapshot taken after the lock, how many jobs the queue's limits (and,
 * when no ready job has a group, the no-group group's) let this claim take. The pick takes no more than
 * that, and the claim records itself in the rate windows it read (`recorded`), all before the statement
 * commits and the lock goes: exact across replicas, as the locked transaction of six round trips it
 * replaces, in one (docs/adr/0008-claim-statements.md; docs/benchmarks.md, "What was tried and what it
 * gave", row "Limited claim in one statement").
 *
 * When some ready job has a group, the groups are served in turn, which this statement does not do: it
 * takes nothing and answers Signal.divert, which sends the claim to flow.ts's walk.
 */

export function limitedPick(queue: string, total: number): PickPlan {
  const before = sql`budget AS (SELECT * FROM baton.flow_budget(${queue}, ${sql.lit(total)}))`;
  // The LIMIT is the budget: a sub-select, so the rows past it are never locked. The planner cannot
  // know it and prices the pick at a tenth of the queue's ready rows; so that this does not make every
  // plan a custom one (a small queue's custom plan looks cheaper than the generic plan's average
  // queue, and planning this statement costs about what running it does), the queue is a sub-select
  // too: unknown to custom and generic plans alike, they cost the same and the generic plan is kept.
  const pick = lockReady({
    queue: sql`(SELECT ${queue}::text)`,
    where: sql`(j.group_key = '' OR NOT (SELECT blank_only FROM budget))`,
    limit: sql`(SELECT CASE WHEN walk THEN 0 ELSE n END FROM budget)`,
  });
  // The windows as flow_budget read them (this statement's own snapshot predates the lock), with the
  // jobs taken added at the latest claimed_at among them, so the window agrees with the jobs' times.
  const after = sql`recorded AS (
    INSERT INTO baton.flow_state AS f (queue, is_queue, group_key, claim_times, claim_counts)
    SELECT ${queue}, w.is_queue, '', r.new_times, r.new_counts
    FROM budget b
    CROSS JOIN (SELECT count(*)::integer AS n, max(claimed_at) AS at FROM claimed) t
    CROSS JOIN LATERAL (VALUES (true, b.rate_period_ms, b.claim_times, b.claim_counts),
                               (false, b.blank_rate_period_ms, b.blank_claim_times, b.blank_claim_counts))
      AS w(is_queue, period_ms, times, counts)
    CROSS JOIN LATERAL baton.rate_recorded(w.times, w.counts, w.period_ms, t.at, t.n) r
    WHERE t.n > 0 AND w.period_ms IS NOT NULL
    ON CONFLICT (queue, is_queue, group_key) DO UPDATE SET
      claim_times = excluded.claim_times, claim_counts = excluded.claim_counts)`;
  const signal = sql`(SELECT CASE WHEN walk THEN ${sql.lit(Signal.divert)}
                                  WHEN NOT flow_controlled THEN ${sql.lit(Signal.plain)}
                                  WHEN reason IS NOT NULL THEN ${sql.lit(Signal.heldBack)}
                                  WHEN NOT (limited OR overrides) THEN ${sql.lit(Signal.grouped)} END
                      FROM budget)`;
  // The limit that held the claim back, read by heldBackOf (statement.ts).
  const signalMeta = sql`(SELECT jsonb_build_object('reason', reason, 'retry_after_ms', retry_after_ms) FROM budget)`;
  return { before, pick, after, signal, signalMeta };
}
