import { type RawBuilder, sql } from 'kysely';
import type { Db } from '../../db/database.js';
import { retryWhenMoved } from '../ring.js';
import { limitedPick } from './limited.js';
import {
  claimantsJsonOf,
  claimOutcomes,
  claimStatementSql,
  heldBackOf,
  lockReady,
  Signal,
  signalRowOf,
  totalOf,
} from './statement.js';
import type { Claimant, ClaimOutcome, HeldBack, LimitReason, Route } from './types.js';

/**
 * The claim of a queue under flow control whose ready jobs have groups: groups served in turn, under
 * concurrency and rate limits per queue and per group (docs/adr/0008-claim-statements.md). A limited
 * queue whose ready jobs have no group is claimed in one statement (limited.ts); this is the
 * transaction that statement diverts to (claim.ts).
 *
 * Exact across replicas: the claims of one queue take a transaction-level advisory lock on the queue,
 * one after another, and only then read what the limits depend on (baton.flow_budget, which takes the
 * lock, and statements after it, all with snapshots taken after the lock, so they see every claim
 * committed before). Claimed jobs are counted on jobs_claimed_idx, bounded by the limit; a job leaving
 * `claimed` by any path (ack, nack, cancel, re-arm, release) frees its slot by leaving the index, with
 * nothing to keep in step. Rate limits are sliding windows (baton.rate_room, baton.rate_recorded): each
 * claim appends its jobs to the queue's (or group's) window in baton.flow_state; a claim may take what
 * the window has room for. Only claims wait for the lock; enqueues and acks never touch it.
 *
 * Groups in turn: each claim walks the groups that have ready jobs in name order, starting after
 * the group the previous claim of the queue served last (kept in flow_state), skipping paused groups
 * and groups at their limits, and deals the jobs out a round at a time: each visited group `weight`
 * jobs per round (deficit round robin), rounds until the claim has its jobs. Within a group, jobs go
 * by priority, then run_at, then id, as everywhere. The walk reads one index descent per group
 * visited, so a claim costs what it takes, however many groups wait.
 */

/** Groups a claim may walk past without taking anything (paused or at their limits). */
const WALK_SLACK = 200;
/**
 * Ready jobs counted per group visited, at most. A group with fewer is known to run short and gets
 * no more than it has; one with this many is taken to have plenty. (Counting up to the claim's size
 * in every group would read max_jobs² index entries for a large claim over many groups.) So a claim
 * of more than this many jobs may, rarely, come back short when a group had more than this but
 * fewer than its share; the next claim takes the rest.
 */
const READY_COUNTED = 64;

/** baton.flow_budget's answer (migrations/0011_flow_budget.ts), as far as the walk reads it. */
interface QueueFlow {
  limited: boolean;
  overrides: boolean;
  /** Some ready job has a group: the claim walks the groups. */
  walk: boolean;
  /** Jobs the queue's own limits let the claim take, and why fewer than it wants. */
  n: number;
  reason: LimitReason | null;
  retry_after_ms: number | null;
  read_at: Date;
  in_flight: number;
  concurrency_limit: number | null;
  last_group: string | null;
  group_concurrency_limit: number | null;
  group_rate_limit: number | null;
  group_rate_period_ms: number | null;
  rate_period_ms: number | null;
}

interface GroupVisit {
  group_key: string;
  paused: boolean;
  concurrency_limit: number | null;
  rate_period_ms: number | null;
  weight: number;
  in_flight: number;
  /** Ready jobs, counted up to READY_COUNTED (or what the claim wants, when less). */
  ready: number;
  /** What the group's rate window has room for (null: no rate limit), and when it frees one when full. */
  rate_room: number | null;
  rate_retry_after_ms: number | null;
}

/** Jobs to take from each group, in the order the groups were visited. */
type Shares = { group: string; k: number; ratePeriodMs: number | null }[];

/** Where the queue's next claim starts: the walk again, the limited statement, or the grouped one. */
type NextRoute = Exclude<Route, 'plain'>;

export async function claimWithFlow(
  db: Db,
  queue: string,
  defaultLeaseMs: number,
  claimants: Claimant[],
): Promise<{ outcomes: ClaimOutcome[]; next: NextRoute }> {
  const wanted = totalOf(claimants);
  return retryWhenMoved(() =>
    db.transaction().execute(async (trx) => {
      // The walk runs on generic plans, as every statement of the request pool does (db/database.ts):
      // left to choose, the plan cache planned the walk afresh on every claim at about the cost of
      // running it (docs/benchmarks.md, "What was tried and what it gave", row "Flow walk on generic plans").
      const flow = (
        await sql<QueueFlow>`SELECT b.* FROM baton.flow_budget(${queue}, ${wanted}::integer) b`.execute(trx)
      ).rows[0]!;
      if (!flow.walk) {
        // No ready job has a group (any more): the one-statement claim, in this transaction (it takes
        // the lock this transaction holds already, at no cost, and reads the budget afresh).
        const { rows } = await claimStatementSql(
          queue,
          defaultLeaseMs,
          claimantsJsonOf(claimants),
          limitedPick(queue, wanted),
        ).execute(trx);
        const signal = signalRowOf(rows);
        const held = signal?.signal === Signal.heldBack ? heldBackOf(signal.meta) : undefined;
        return { outcomes: claimOutcomes(rows, claimants, held), next: 'limited' as const };
      }
      const next: NextRoute = flow.limited || flow.overrides ? 'walk' : 'grouped';
      if (!claimants.some((c) => c.wholeGroups)) {
        return { outcomes: await walkAndClaim(trx, queue, defaultLeaseMs, flow, flow.n, claimants), next };
      }
      // Whole groups (SQS FIFO receives): a group's jobs go to one claimant, so each claimant has a
      // walk and a claim of its own, in this transaction, within the queue's budget. A later walk sees
      // the jobs an earlier one claimed (this transaction's own writes), so it passes over their groups.
      const outcomes: ClaimOutcome[] = [];
      let budget = flow.n;
      for (const claimant of claimants) {
        const wanted = Math.min(budget, claimant.maxJobs);
        const [outcome] = await walkAndClaim(trx, queue, defaultLeaseMs, flow, wanted, [claimant]);
        outcomes.push(outcome!);
        budget -= outcome!.jobs.length;
        // The next walk counts these as in flight (walkFrom skips counting a group's claimed jobs when
        // the queue's count says its limit cannot bind), and the turn moves on, as from one claim to
        // the next.
        flow.in_flight += outcome!.jobs.length;
        const last = outcome!.jobs.at(-1);
        if (last) flow.last_group = last.group_key;
      }
      return { outcomes, next };
    }),
  );
}

/** Walk the groups, deal `wanted` jobs out over them, claim those for the claimants, and record it. */
async function walkAndClaim(
  trx: Db,
  queue: string,
  defaultLeaseMs: number,
  flow: QueueFlow,
  wanted: number,
  claimants: Claimant[],
): Promise<ClaimOutcome[]> {
  let heldBack: HeldBack | undefined = flow.reason === null ? undefined : heldBackOf(flow);
  const whole = claimants.length === 1 && claimants[0]!.wholeGroups === true;
  const visits = wanted > 0 ? await walkGroups(trx, queue, flow, wanted, whole) : [];
  const plan = shareOut(visits, wanted, whole);
  if (plan.shares.length === 0) return claimOutcomes([], claimants, heldBack ?? plan.heldBack);
  heldBack ??= plan.heldBack;
  const claimed = await claimStatementSql(queue, defaultLeaseMs, claimantsJsonOf(claimants), {
    pick: groupPick(queue, plan.shares),
  }).execute(trx);
  const taken = claimed.rows.filter((r) => Number(r.claimant) > 0);
  await recordClaims(trx, queue, flow, plan.shares, taken);
  return claimOutcomes(claimed.rows, claimants, heldBack);
}

/**
 * The groups with ready jobs, in turn after the last one served (wrapping round to it), with their
 * limits: read a claim's worth of groups at a time, until the groups read can fill the claim or
 * WALK_SLACK more have been passed over.
 */
async function walkGroups(
  db: Db,
  queue: string,
  flow: QueueFlow,
  wanted: number,
  whole: boolean,
): Promise<GroupVisit[]> {
  const max = wanted + WALK_SLACK;
  const start = flow.last_group;
  // No group served yet: from the first name (''), once round. Else after the last one served, to
  // the end of the names, then (wrapped, walkFrom) from the first name up to and including it.
  let cursor: Cursor = { after: start ?? '', inclusive: start === null, wrapped: false };
  const visits: GroupVisit[] = [];
  while (visits.length < max) {
    const n = Math.min(wanted, max - visits.length);
    const batch = await walkFrom(db, queue, flow, cursor, n, wanted);
    visits.push(...batch);
    // Enough groups to fill the claim in one round: stop. Otherwise read on, so that every group with
    // jobs gets its turn before any gets a second one; a walk that came back short has gone round.
    if (shareOut(visits, wanted, whole).firstRound >= wanted || batch.length < n) break;
    const last = batch[n - 1]!;
    cursor = { after: last.group_key, inclusive: false, wrapped: last.wrapped };
  }
  return visits;
}

/**
 * Where a walk of the groups resumes: after (or at) one name; `wrapped` once it has gone past the last
 * name and started again from the first, up to and including the group served last.
 */
interface Cursor {
  after: string;
  inclusive: boolean;
  wrapped: boolean;
}

/**
 * Up to `max` groups with ready jobs from the cursor on, in name order: a skip scan of
 * jobs_group_ready_idx, one descent per group however many jobs each holds. With each, its limits
 * (the group's overrides, else the queue's group defaults), its claimed jobs (counted up to its
 * concurrency limit), its ready jobs (counted up to READY_COUNTED) and the room in its rate window
 * when the budget was read.
 */
function walkFrom(db: Db, queue: string, flow: QueueFlow, cursor: Cursor, max: number, wanted: number) {
  // A group holds no more claimed jobs than the whole queue: when the queue's count is exact (under its
  // own limit), a group limit of at least that count plus this claim cannot bind, and the group's
  // claimed jobs need not be counted (the count is most of a walk's cost with many jobs in flight).
  const queueExact = flow.concurrency_limit !== null && flow.in_flight < flow.concurrency_limit;
  const unbinding = queueExact ? flow.in_flight + wanted : null;
  // The next group after `prev`, below the bound: the end of the names (E'\\x7f' is above every
  // group name, printable ASCII by limits.ts) until the walk wraps, the group served last after. Or,
  // when nothing is left before the end and the walk has not wrapped yet, the first group from the
  // start of the names: the wrap, in the same statement.
  const start = flow.last_group;
  // Each branch is a query of its own (not a scalar sub-select, which PostgreSQL evaluated twice: once
  // for the filter, once for the output). The text says whether there is an upper bound, and its
  // sizes are literals (as statement.ts's batchLimit explains): with `$x IS NULL OR ...` and parameter
  // LIMITs the plan cache priced the generic plan above a custom one and planned the walk afresh on
  // every claim, about as dear as running it.
  const step = (prev: RawBuilder<unknown>, inclusive: boolean, wrapped: RawBuilder<unknown>) => sql`(
    SELECT x.g, x.wrapped FROM (
      (SELECT j.group_key AS g, ${wrapped} AS wrapped FROM baton.jobs j
       WHERE j.queue = ${queue} AND j.state = 'ready'
         AND ${inclusive ? sql`j.group_key >= ${prev}` : sql`j.group_key > ${prev}`}
         ${start === null ? sql`` : sql`AND j.group_key <= CASE WHEN ${wrapped} THEN ${start}::text ELSE E'\\x7f' END`}
       ORDER BY j.group_key LIMIT 1)
      ${
        start === null
          ? sql``
          : sql`UNION ALL
      (SELECT j.group_key, true FROM baton.jobs j
       WHERE NOT ${wrapped} AND j.queue = ${queue} AND j.state = 'ready' AND j.group_key <= ${start}::text
       ORDER BY j.group_key LIMIT 1)`
      }
    ) x LIMIT 1)`;
  return sql<GroupVisit & { wrapped: boolean }>`
    WITH RECURSIVE walk(n, g, wrapped) AS (
      SELECT 1, f.g, f.wrapped FROM ${step(sql`${cursor.after}::text`, cursor.inclusive, sql`${cursor.wrapped}::boolean`)} f
      UNION ALL
      SELECT w.n + 1, f.g, f.wrapped FROM walk w CROSS JOIN LATERAL ${step(sql`w.g`, false, sql`w.wrapped`)} f
      WHERE w.n < ${sql.lit(max)}
    )
    SELECT w.g AS group_key, coalesce(o.paused, false) AS paused,
           coalesce(o.concurrency_limit, ${flow.group_concurrency_limit}::integer) AS concurrency_limit,
           rl.period_ms AS rate_period_ms, coalesce(o.weight, 1) AS weight, c.in_flight, r.ready,
           rr.room AS rate_room, rr.retry_after_ms AS rate_retry_after_ms, w.wrapped
    FROM walk w
    LEFT JOIN baton.queue_groups o ON o.queue = ${queue} AND o.group_key = w.g
    LEFT JOIN baton.flow_state fs ON fs.queue = ${queue} AND NOT fs.is_queue AND fs.group_key = w.g
    CROSS JOIN LATERAL (
      SELECT coalesce(o.rate_limit, ${flow.group_rate_limit}::integer) AS lim,
             coalesce(o.rate_period_ms, ${flow.group_rate_period_ms}::integer) AS period_ms
    ) rl
    CROSS JOIN LATERAL baton.rate_room(fs.claim_times, fs.claim_counts, rl.lim, rl.period_ms, ${flow.read_at}::timestamptz) rr
    CROSS JOIN LATERAL (
      SELECT count(*)::int AS in_flight FROM (
        SELECT 1 FROM baton.jobs c WHERE c.queue = ${queue} AND c.group_key = w.g AND c.state = 'claimed'
        LIMIT CASE WHEN coalesce(o.concurrency_limit, ${flow.group_concurrency_limit}::integer) >= ${unbinding}::integer
                   THEN 0 ELSE coalesce(o.concurrency_limit, ${flow.group_concurrency_limit}::integer, 0) END) x
    ) c
    CROSS JOIN LATERAL (
      SELECT count(*)::int AS ready FROM (
        SELECT 1 FROM baton.jobs r WHERE r.queue = ${queue} AND r.group_key = w.g AND r.state = 'ready'
        LIMIT ${sql.lit(Math.min(wanted, READY_COUNTED))}) x
    ) r
    ORDER BY w.n`
    .execute(db)
    .then((r) => r.rows);
}

/**
 * Deal `wanted` jobs out over the visited groups, round by round: each group that is not paused and
 * has room under its limits gets up to its weight per round. Answers the shares and, when nothing
 * could be given to some group, why.
 *
 * With `whole` (Claimant.wholeGroups), a group limited to one job at a time that has none claimed has
 * room for all it has ready, and gives it at once (no rounds) before the next group is served.
 */
function shareOut(
  visits: GroupVisit[],
  wanted: number,
  whole = false,
): { shares: Shares; total: number; firstRound: number; heldBack?: HeldBack } {
  let heldBack: HeldBack | undefined;
  const hold = (reason: LimitReason, retryAfterMs?: number) => {
    if (!heldBack || (retryAfterMs !== undefined && (heldBack.retryAfterMs ?? Infinity) > retryAfterMs)) {
      heldBack = retryAfterMs === undefined ? { reason } : { reason, retryAfterMs };
    }
  };
  const open = visits.flatMap((v) => {
    if (v.paused) {
      hold('group_paused');
      return [];
    }
    let room = v.ready < Math.min(wanted, READY_COUNTED) ? v.ready : Number.POSITIVE_INFINITY;
    // One at a time, taken whole: nothing in flight lets the group give all it has, in order.
    const wholeGroup = whole && v.concurrency_limit === 1 && v.in_flight === 0;
    if (v.concurrency_limit !== null && !wholeGroup) {
      room = Math.min(room, v.concurrency_limit - v.in_flight);
    }
    if (v.rate_room !== null) {
      if (v.rate_room <= 0) hold('group_rate', v.rate_retry_after_ms ?? undefined);
      room = Math.min(room, v.rate_room);
    }
    if (room <= 0) {
      if (v.concurrency_limit !== null && v.concurrency_limit - v.in_flight <= 0) hold('group_concurrency');
      return [];
    }
    const ratePeriodMs = v.rate_room === null ? null : v.rate_period_ms;
    return [{ group: v.group_key, weight: wholeGroup ? room : v.weight, room, k: 0, ratePeriodMs }];
  });
  const firstRound = open.reduce((sum, g) => sum + Math.min(g.weight, g.room), 0);
  let total = 0;
  for (let progress = true; progress && total < wanted; ) {
    progress = false;
    for (const g of open) {
      const take = Math.min(g.weight, g.room - g.k, wanted - total);
      if (take <= 0) continue;
      g.k += take;
      total += take;
      progress = true;
    }
  }
  const shares = open
    .filter((g) => g.k > 0)
    .map(({ group, k, ratePeriodMs }) => ({ group, k, ratePeriodMs }));
  return heldBack ? { shares, total, firstRound, heldBack } : { shares, total, firstRound };
}

/** The pick of a grouped queue: each group's share, its first jobs in claim order. */
function groupPick(queue: string, shares: Shares) {
  const input = JSON.stringify(shares.map((s) => ({ g: s.group, k: s.k })));
  return sql`
    SELECT p.slot, p.id, p.priority, p.run_at
    FROM json_array_elements(${input}::json) AS s
    CROSS JOIN LATERAL (${lockReady({
      queue: sql`${queue}`,
      where: sql`j.group_key = s->>'g'`,
      limit: sql`(s->>'k')::integer`,
    })}
    ) p`;
}

/**
 * What the next claim must know: the group served last, and this claim's jobs in the windows of
 * the queue's and each group's rate limit, at the latest claimed_at of the jobs taken. The windows are
 * read here, under the lock, by a statement that starts after it (baton.rate_recorded drops the buckets
 * that have left them).
 */
async function recordClaims(
  db: Db,
  queue: string,
  flow: QueueFlow,
  shares: Shares,
  taken: { group_key: string; claimed_at: Date }[],
): Promise<void> {
  const byGroup = new Map<string, number>();
  let at = flow.read_at;
  for (const row of taken) {
    byGroup.set(row.group_key, (byGroup.get(row.group_key) ?? 0) + 1);
    if (row.claimed_at > at) at = row.claimed_at;
  }
  const lastGroup = [...shares].reverse().find((s) => byGroup.has(s.group))?.group;
  const queueChanged =
    flow.rate_period_ms !== null || (lastGroup !== undefined && lastGroup !== flow.last_group);
  const rows = [
    ...(queueChanged
      ? [
          {
            is_queue: true,
            group_key: '',
            last_group: lastGroup ?? flow.last_group,
            period_ms: flow.rate_period_ms,
            n: taken.length,
          },
        ]
      : []),
    ...shares.flatMap((s) =>
      s.ratePeriodMs !== null && byGroup.has(s.group)
        ? [
            {
              is_queue: false,
              group_key: s.group,
              last_group: null,
              period_ms: s.ratePeriodMs,
              n: byGroup.get(s.group)!,
            },
          ]
        : [],
    ),
  ];
  if (rows.length === 0) return;
  await sql`
    INSERT INTO baton.flow_state AS f (queue, is_queue, group_key, last_group, claim_times, claim_counts)
    SELECT ${queue}, r.is_queue, r.group_key, r.last_group, w.new_times, w.new_counts
    FROM jsonb_to_recordset(${JSON.stringify(rows)}::jsonb)
      AS r(is_queue boolean, group_key text, last_group text, period_ms integer, n integer)
    LEFT JOIN baton.flow_state s ON s.queue = ${queue} AND s.is_queue = r.is_queue AND s.group_key = r.group_key
    CROSS JOIN LATERAL baton.rate_recorded(s.claim_times, s.claim_counts, r.period_ms, ${at}::timestamptz, r.n) w
    ON CONFLICT (queue, is_queue, group_key) DO UPDATE SET
      last_group = excluded.last_group, claim_times = excluded.claim_times, claim_counts = excluded.claim_counts`.execute(
    db,
  );
}
