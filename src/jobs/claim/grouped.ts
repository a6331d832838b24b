import { sql } from 'kysely';
import { claimOrder } from '../job-row.js';
import { lockReady, type PickPlan, Signal } from './statement.js';

/**
 * The claim of a grouped queue without limits or group overrides: groups served in turn, in the one
 * claim statement (statement.ts wraps this pick in its claim; docs/adr/0008-claim-statements.md).
 * Queues with limits, weights or paused groups go the locked way instead (limited.ts, flow.ts), which
 * this statement says by answering Signal.divert.
 *
 * The turn. Groups are visited in name order, starting after the group flow_state.last_group names
 * (wrapping round to the first name), and each visited group gives up to QUANTUM(n) = ceil(n / 4) of
 * its first jobs in claim order, until the claim has its n jobs: deficit round robin with that quantum,
 * so a claim of n jobs visits about four groups however many there are. The quantum makes the cost:
 * each visit is one descent of jobs_group_ready_idx in each of the ring's eight partitions (a Merge
 * Append with LIMIT), and visiting one group per job made a claim over many groups cost several times
 * an ungrouped one (docs/benchmarks.md, "What was tried and what it gave", row "Grouped claim in one
 * statement"). The last group visited may give fewer than its quantum because the claim is full: then
 * the turn stays with it (last_group is the group visited before it), so every group gets at least a
 * quantum per turn. When every group has been visited and the claim is still short (few groups), the
 * groups that gave a full quantum give more, one job each per round, so two groups with jobs split a
 * claim evenly.
 *
 * The bound: while g groups have ready jobs, a turn serves at most g quanta plus one; a group with k
 * ready jobs has them all claimed within ceil(k / quantum) turns, about k * g jobs (plus a turn), after
 * they arrive, however many jobs other groups had queued before (test/flow/fairness.test.ts).
 *
 * No lock is taken but the rows'. A replica runs one claim statement per queue at a time
 * (statement-groups.ts); claims of two replicas may read the same turn and visit the same groups, and
 * then one passes over the rows the other locked and takes the next ones. Neither waits for the other.
 */

/** Jobs a claim of `total` takes from each group it visits on its first pass. */
export const quantumOf = (total: number) => Math.max(1, Math.ceil(total / 4));

/**
 * The CTEs of the walk (`turn`, `walk`, `visited`, `cand`), placed after statement.ts's `settings`; the
 * pick (`picked`: the candidates, locked); and the upsert of the turn (`turned`), after the claim.
 *
 * `walk` is the recursion: row 0 holds the start, each later row one visited group (g, k jobs taken,
 * their slots and ids in claim order) and the bounds of the next visit [lo, hi). A visit that finds no
 * group past lo wraps round once: lo '' (the first name) and hi the start. Group names are printable
 * ASCII (limits.ts), so E'\x7f' is above them all and name || E'\x01' is the least name after `name`.
 */
export function groupedPick(queue: string, total: number): PickPlan {
  const n = sql.lit(total);
  const quantum = sql.lit(quantumOf(total));
  const before = sql`
    turn AS (
      SELECT coalesce((SELECT f.last_group || E'\\x01' FROM baton.flow_state f
                       WHERE f.queue = ${queue} AND f.is_queue AND f.group_key = ''), '') COLLATE "C" AS start,
             (SELECT limited FROM settings)
               OR EXISTS (SELECT 1 FROM baton.queue_groups o WHERE o.queue = ${queue}) AS diverted
    ), walk(n, lo, hi, wrapped, have, g, k, slots, ids, priorities, run_ats) AS (
      SELECT 0, t.start, E'\\x7f'::text COLLATE "C", false, 0, NULL::text COLLATE "C", 0,
             NULL::smallint[], NULL::bigint[], NULL::integer[], NULL::timestamptz[]
      FROM turn t CROSS JOIN settings st WHERE NOT t.diverted AND NOT st.paused
      UNION ALL
      SELECT w.n + 1, CASE WHEN s.g IS NULL THEN '' ELSE s.g || E'\\x01' END, CASE WHEN s.g IS NULL THEN t.start ELSE w.hi END,
             w.wrapped OR s.g IS NULL, w.have + s.k, s.g, s.k, s.slots, s.ids, s.priorities, s.run_ats
      FROM walk w CROSS JOIN turn t CROSS JOIN LATERAL (
        -- The next group's first jobs: one Merge Append over the partitions, read up to a quantum,
        -- kept while they belong to the first group read (in claim order, as read).
        SELECT min(x.group_key) AS g, count(*)::int AS k, array_agg(x.slot) AS slots, array_agg(x.id) AS ids,
               array_agg(x.priority) AS priorities, array_agg(x.run_at) AS run_ats
        FROM (
          SELECT p.*, first_value(p.group_key) OVER () AS first FROM (${lockReady({
            queue: sql`${queue}`,
            where: sql`j.group_key >= w.lo AND j.group_key < w.hi`,
            columns: sql`j.group_key, j.slot, j.id, j.priority, j.run_at`,
            orderFirst: sql`j.group_key`,
            limit: quantum,
          })}) p
        ) x WHERE x.group_key = x.first
      ) s
      WHERE w.have < ${n} AND (s.g IS NOT NULL OR (NOT w.wrapped AND t.start > ''))
    ), visited AS (
      SELECT n, g, k, slots, ids, priorities, run_ats, max(have) OVER () AS have FROM walk WHERE g IS NOT NULL
    ), cand AS (
      -- First pass: each visited group's jobs, group by group. Then, when every group was visited and
      -- the claim is still short (few groups), round by round from the groups that gave a full quantum.
      SELECT c.*, row_number() OVER (ORDER BY c.phase, c.a, c.b) AS seq FROM (
        SELECT 1 AS phase, v.n AS a, u.r AS b, v.n, v.g, u.slot, u.id, u.priority, u.run_at
        FROM visited v
        CROSS JOIN LATERAL unnest(v.slots, v.ids, v.priorities, v.run_ats) WITH ORDINALITY AS u(slot, id, priority, run_at, r)
        UNION ALL
        SELECT 2, u.r, v.n, v.n, v.g, u.slot, u.id, u.priority, u.run_at
        FROM visited v CROSS JOIN LATERAL (
          SELECT m.*, row_number() OVER (ORDER BY ${claimOrder('m')}) AS r FROM (${lockReady({
            queue: sql`${queue}`,
            where: sql`j.group_key = v.g`,
            offset: quantum,
            limit: sql`${n} - v.have`,
          })}) m
        ) u
        WHERE v.have < ${n} AND v.k = ${quantum}
      ) c
      ORDER BY c.phase, c.a, c.b
      LIMIT ${n}
    )`;
  // The walk locked its rows as it read them (FOR UPDATE SKIP LOCKED), so a row another replica's
  // claim holds is passed over, never waited for (two claims waiting for each other's rows, taken in
  // different orders, would deadlock), and the walk goes on to the next job instead of coming back
  // short. A few rows read but cut off by the LIMIT stay locked until the claim commits; other claims
  // pass over them meanwhile.
  const pick = sql`SELECT c.slot, c.id, c.priority, c.run_at FROM cand c`;
  // The turn passes to the last group served, or stays with it when the claim filled before it had its
  // quantum (the first pass was cut short): then last_group is the group visited before it. The queue's
  // flow_state row is skipped, not waited for, while another replica's claim holds it (that claim
  // moves the turn); it is inserted by the queue's first grouped claim.
  const after = sql`
    turn_to AS (
      SELECT CASE WHEN l.phase = 1 AND l.have > ${n}
                  THEN coalesce((SELECT v.g FROM visited v WHERE v.n < l.n ORDER BY v.n DESC LIMIT 1), l.g)
                  ELSE l.g END AS g
      FROM (SELECT c.phase, c.n, c.g, v.have FROM cand c JOIN visited v ON v.n = c.n ORDER BY c.seq DESC LIMIT 1) l
    ), turn_row AS (
      SELECT f.queue FROM baton.flow_state f WHERE f.queue = ${queue} AND f.is_queue AND f.group_key = ''
      FOR UPDATE SKIP LOCKED
    ), turned AS (
      UPDATE baton.flow_state f SET last_group = t.g
      FROM turn_row r CROSS JOIN turn_to t
      WHERE f.queue = r.queue AND f.is_queue AND f.group_key = '' AND f.last_group IS DISTINCT FROM t.g
    ), first_turn AS (
      INSERT INTO baton.flow_state (queue, is_queue, group_key, last_group)
      SELECT ${queue}, true, '', t.g FROM turn_to t
      WHERE NOT EXISTS (SELECT 1 FROM baton.flow_state f WHERE f.queue = ${queue} AND f.is_queue AND f.group_key = '')
      ON CONFLICT DO NOTHING
    )`;
  // Divert to the limited claim when the queue has limits or overrides; say `plain` when it is not under
  // flow control at all, so that its next claim goes back to the plain statement.
  const signal = sql`CASE WHEN (SELECT diverted FROM turn) THEN ${sql.lit(Signal.divert)}
                          WHEN NOT flow THEN ${sql.lit(Signal.plain)} END`;
  return { before, pick, after, signal };
}
