import { type RawBuilder, sql } from 'kysely';
import type { Db } from '../db/database.js';
import type { QueueRow } from '../queues/queue-store.js';
import {
  type Claimant,
  type ClaimOutcome,
  claimGroupStatement,
  dealt,
  type HeldBack,
  type LimitReason,
  totalOf,
} from './claim.js';
import { notExpired } from './job-row.js';
import { type RateWindow, rateRoom, recorded, windowOf } from './rate-window.js';
import { retryWhenMoved } from './ring.js';

/**
 * The claim of a queue under flow control: concurrency and rate limits, per queue and per group, and
 * groups served in turn (docs/architecture.md, "Flow control").
 *
 * Exact across replicas: the claims of one queue take a transaction-level advisory lock on the
 * queue, one after another, and only then read what the limits depend on, in statements that
 * start after the lock (so they see every claim committed before). Claimed jobs are counted on
 * jobs_claimed_idx, bounded by the limit; a job leaving `claimed` by any path (ack, nack, cancel,
 * re-arm, release) frees its slot by leaving the index, with nothing to keep in step. Rate limits
 * are sliding windows: each claim appends (time, jobs) to the queue's (or group's) window in
 * baton.flow_state; a claim may take what the window has room for. Only claims wait for the lock;
 * enqueues and acks never touch it.
 *
 * Groups in turn: each claim walks the groups that have ready jobs in name order, starting after
 * the group the previous claim of the queue served last (kept in flow_state), skipping paused groups
 * and groups at their limits, and deals the jobs out a round at a time: each visited group `weight`
 * jobs per round (deficit round robin), rounds until the claim has its jobs. Within a group, jobs go
 * by priority, then run_at, then id, as everywhere. The walk reads one index descent per group
 * visited, so a claim costs what it takes, however many groups wait.
 */

const FLOW_LOCK_CLASS = 0x6261_7466;
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

/** A queue's row as far as flow control reads it, and what the claim counts and remembers. */
interface QueueFlow
  extends Pick<
    QueueRow,
    | 'paused'
    | 'grouped'
    | 'concurrency_limit'
    | 'rate_limit'
    | 'rate_period_ms'
    | 'group_concurrency_limit'
    | 'group_rate_limit'
    | 'group_rate_period_ms'
  > {
  in_flight: number;
  last_group: string | null;
  claim_times: Date[] | null;
  claim_counts: number[] | null;
  now: Date;
  /** No ready job of the queue has a group. */
  ungrouped_only: boolean;
  /** The no-group group's claimed jobs (0 when its limit cannot bind) and rate window. */
  blank_in_flight: number;
  blank_claim_times: Date[] | null;
  blank_claim_counts: number[] | null;
}

interface GroupVisit {
  group_key: string;
  paused: boolean;
  concurrency_limit: number | null;
  rate_limit: number | null;
  rate_period_ms: number | null;
  weight: number;
  in_flight: number;
  /** Ready jobs, counted up to READY_COUNTED (or what the claim wants, when less). */
  ready: number;
  claim_times: Date[] | null;
  claim_counts: number[] | null;
}

/** Jobs to take from each group, in the order the groups were visited. */
type Shares = { group: string; k: number; window?: { periodMs: number; log: RateWindow } }[];

export async function claimWithFlow(
  db: Db,
  queue: string,
  defaultLeaseMs: number,
  claimants: Claimant[],
): Promise<{ outcomes: ClaimOutcome[]; limited: boolean }> {
  const {
    rows,
    heldBack,
    limited = false,
  } = await retryWhenMoved(() =>
    db.transaction().execute(async (trx) => {
      // Generic plans for the rest of the transaction, set with the lock (no round trip of its own): the
      // walk's plan cache otherwise kept choosing custom plans, planning the walk afresh on every
      // claim at about the cost of running it (docs/benchmarks.md, issue 16, second pass).
      await sql`SELECT pg_advisory_xact_lock(${FLOW_LOCK_CLASS}::integer, hashtext(${queue})),
                       set_config('plan_cache_mode', 'force_generic_plan', true)`.execute(trx);
      const flow = await readQueueFlow(trx, queue, totalOf(claimants));
      if (!flow) return { rows: [] };
      const limited = hasLimits(flow);
      if (flow.paused) return { rows: [], limited };
      const budget = queueBudget(flow, totalOf(claimants));
      if (budget.n === 0) return { rows: [], heldBack: budget.heldBack, limited };

      let pick: RawBuilder<unknown>;
      let shares: Shares | undefined;
      let heldBack = budget.heldBack;
      // Group limits apply to the groups of whatever jobs there are, even before the queue is marked
      // grouped (its first grouped job's mark can be skipped, or come by a path that does not mark,
      // such as a redrive into it): walk the groups whenever a group limit is set. Unless no ready job
      // has a group (read after the lock): then the one group is the no-group group, and the walk, a
      // third pass over its head in the ready index, is not needed. A grouped job enqueued meanwhile
      // waits for the next claim.
      if (flow.grouped || flow.group_concurrency_limit !== null || flow.group_rate_limit !== null) {
        const visits = flow.ungrouped_only
          ? [blankVisit(flow, budget.n)]
          : await walkGroups(trx, queue, flow, budget.n);
        const plan = shareOut(flow, visits, budget.n);
        if (plan.shares.length === 0) return { rows: [], heldBack: heldBack ?? plan.heldBack, limited };
        heldBack ??= plan.heldBack;
        shares = plan.shares;
        pick = groupPick(queue, shares);
      } else pick = orderedPick(queue, budget.n);

      const claimed = await claimGroupStatement(queue, defaultLeaseMs, claimants, { pick }).execute(trx);
      const taken = claimed.rows.filter((r) => Number(r.claimant) > 0);
      await recordClaims(trx, queue, flow, shares, taken);
      return { rows: claimed.rows, heldBack, limited };
    }),
  );
  // A limit held a claimant back only if it got fewer jobs than it asked for.
  const outcomes = dealt(rows, claimants).map((jobs, i) =>
    heldBack && jobs.length < claimants[i]!.maxJobs ? { jobs, heldBack } : { jobs },
  );
  return { outcomes, limited };
}

/** Whether the queue itself has limits (a queue with only group overrides has none). */
const hasLimits = (flow: QueueFlow) =>
  flow.concurrency_limit !== null ||
  flow.rate_limit !== null ||
  flow.group_concurrency_limit !== null ||
  flow.group_rate_limit !== null;

/**
 * The queue's row, its rate window and turn, its claimed jobs (counted up to its limit), and for the
 * jobs without a group: whether any ready job has a group at all (when none does, the claim needs no
 * walk: see claimWithFlow), the no-group group's claimed jobs (not counted when its limit cannot
 * bind, as in walkFrom) and its rate window.
 */
async function readQueueFlow(db: Db, queue: string, wanted: number): Promise<QueueFlow | undefined> {
  const { rows } = await sql<QueueFlow>`
    SELECT q.paused, q.grouped, q.concurrency_limit, q.rate_limit, q.rate_period_ms, q.group_concurrency_limit,
           q.group_rate_limit, q.group_rate_period_ms, fs.last_group, fs.claim_times, fs.claim_counts,
           clock_timestamp() AS now, qc.in_flight, b.in_flight AS blank_in_flight,
           gs.claim_times AS blank_claim_times, gs.claim_counts AS blank_claim_counts,
           NOT EXISTS (SELECT 1 FROM baton.jobs g WHERE g.queue = q.name AND g.state = 'ready' AND g.group_key > '')
             AS ungrouped_only
    FROM baton.queues q
    LEFT JOIN baton.flow_state fs ON fs.queue = q.name AND fs.is_queue AND fs.group_key = ''
    LEFT JOIN baton.flow_state gs ON gs.queue = q.name AND NOT gs.is_queue AND gs.group_key = ''
    CROSS JOIN LATERAL (
      SELECT count(*)::int AS in_flight FROM (
        SELECT 1 FROM baton.jobs c WHERE c.queue = q.name AND c.state = 'claimed' LIMIT coalesce(q.concurrency_limit, 0)) x
    ) qc
    CROSS JOIN LATERAL (
      SELECT count(*)::int AS in_flight FROM (
        SELECT 1 FROM baton.jobs c WHERE c.queue = q.name AND c.group_key = '' AND c.state = 'claimed'
        LIMIT CASE WHEN qc.in_flight < q.concurrency_limit AND q.group_concurrency_limit >= qc.in_flight + ${wanted}::integer
                   THEN 0 ELSE coalesce(q.group_concurrency_limit, 0) END) x
    ) b
    WHERE q.name = ${queue}`.execute(db);
  return rows[0];
}

/**
 * The no-group group as the walk would have found it, for a queue whose ready jobs have no group:
 * the queue's group defaults (no group can override it), its counted claimed jobs and rate window,
 * and as many ready jobs as a walk counts at most (the pick takes what there is).
 */
function blankVisit(flow: QueueFlow, wanted: number): GroupVisit {
  return {
    group_key: '',
    paused: false,
    concurrency_limit: flow.group_concurrency_limit,
    rate_limit: flow.group_rate_limit,
    rate_period_ms: flow.group_rate_period_ms,
    weight: 1,
    in_flight: flow.blank_in_flight,
    ready: Math.min(wanted, READY_COUNTED),
    claim_times: flow.blank_claim_times,
    claim_counts: flow.blank_claim_counts,
  };
}

/** How many jobs the queue's own limits let this claim take. */
function queueBudget(flow: QueueFlow, wanted: number): { n: number; heldBack?: HeldBack } {
  let n = wanted;
  let heldBack: HeldBack | undefined;
  if (flow.concurrency_limit !== null) {
    const room = Math.max(0, flow.concurrency_limit - flow.in_flight);
    if (room < n) [n, heldBack] = [room, { reason: 'concurrency' }];
  }
  if (flow.rate_limit !== null && flow.rate_period_ms !== null) {
    const log = windowOf(flow.claim_times, flow.claim_counts);
    const room = rateRoom(log, flow.rate_limit, flow.rate_period_ms, flow.now);
    if (room.room < n) {
      n = room.room;
      heldBack = { reason: 'rate', retryAfterMs: room.retryAfterMs };
    }
  }
  return { n, heldBack };
}

/**
 * The groups with ready jobs, in turn after the last one served (wrapping round to it), with their
 * limits: read a claim's worth of groups at a time, until the groups read can fill the claim or
 * WALK_SLACK more have been passed over.
 */
async function walkGroups(db: Db, queue: string, flow: QueueFlow, wanted: number): Promise<GroupVisit[]> {
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
    if (shareOut(flow, visits, wanted).firstRound >= wanted || batch.length < n) break;
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
 * concurrency limit), its ready jobs (counted up to READY_COUNTED) and its rate window.
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
  // sizes are literals (as claim.ts's batchLimit explains): with `$x IS NULL OR ...` and parameter
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
           coalesce(o.rate_limit, ${flow.group_rate_limit}::integer) AS rate_limit,
           coalesce(o.rate_period_ms, ${flow.group_rate_period_ms}::integer) AS rate_period_ms,
           coalesce(o.weight, 1) AS weight, c.in_flight, r.ready, fs.claim_times, fs.claim_counts, w.wrapped
    FROM walk w
    LEFT JOIN baton.queue_groups o ON o.queue = ${queue} AND o.group_key = w.g
    LEFT JOIN baton.flow_state fs ON fs.queue = ${queue} AND NOT fs.is_queue AND fs.group_key = w.g
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
 */
function shareOut(
  flow: QueueFlow,
  visits: GroupVisit[],
  wanted: number,
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
    if (v.concurrency_limit !== null) room = Math.min(room, v.concurrency_limit - v.in_flight);
    let window: Shares[number]['window'];
    if (v.rate_limit !== null && v.rate_period_ms !== null) {
      const log = windowOf(v.claim_times, v.claim_counts);
      const rate = rateRoom(log, v.rate_limit, v.rate_period_ms, flow.now);
      if (rate.room <= 0) hold('group_rate', rate.retryAfterMs);
      room = Math.min(room, rate.room);
      window = { periodMs: v.rate_period_ms, log };
    }
    if (room <= 0) {
      if (v.concurrency_limit !== null && v.concurrency_limit - v.in_flight <= 0) hold('group_concurrency');
      return [];
    }
    return [{ group: v.group_key, weight: v.weight, room, k: 0, window }];
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
  const shares = open.filter((g) => g.k > 0).map(({ group, k, window }) => ({ group, k, window }));
  return heldBack ? { shares, total, firstRound, heldBack } : { shares, total, firstRound };
}

/** The pick of a limited queue without groups: the first ready jobs in claim order. */
function orderedPick(queue: string, n: number) {
  return sql`
    SELECT j.slot, j.id, j.priority, j.run_at FROM baton.jobs j
    WHERE j.queue = ${queue} AND j.state = 'ready' AND ${notExpired('j')}
    ORDER BY j.priority DESC, j.run_at, j.id
    LIMIT ${n}
    FOR UPDATE SKIP LOCKED`;
}

/** The pick of a grouped queue: each group's share, its first jobs in claim order. */
function groupPick(queue: string, shares: Shares) {
  const input = JSON.stringify(shares.map((s) => ({ g: s.group, k: s.k })));
  return sql`
    SELECT p.slot, p.id, p.priority, p.run_at
    FROM json_array_elements(${input}::json) AS s
    CROSS JOIN LATERAL (
      SELECT j.slot, j.id, j.priority, j.run_at FROM baton.jobs j
      WHERE j.queue = ${queue} AND j.group_key = s->>'g' AND j.state = 'ready' AND ${notExpired('j')}
      ORDER BY j.priority DESC, j.run_at, j.id
      LIMIT (s->>'k')::integer
      FOR UPDATE SKIP LOCKED
    ) p`;
}

/**
 * What the next claim must know: the group served last, and this claim's jobs in the windows of
 * the queue's and each group's rate limit, at the latest claimed_at of the jobs taken.
 */
async function recordClaims(
  db: Db,
  queue: string,
  flow: QueueFlow,
  shares: Shares | undefined,
  taken: { group_key: string; claimed_at: Date }[],
): Promise<void> {
  const byGroup = new Map<string, number>();
  let at = flow.now;
  for (const row of taken) {
    byGroup.set(row.group_key, (byGroup.get(row.group_key) ?? 0) + 1);
    if (row.claimed_at > at) at = row.claimed_at;
  }
  const lastGroup = shares ? [...shares].reverse().find((s) => byGroup.has(s.group))?.group : undefined;
  const queueWindow =
    flow.rate_period_ms === null
      ? windowOf(null, null)
      : recorded(windowOf(flow.claim_times, flow.claim_counts), flow.rate_period_ms, at, taken.length);
  const queueChanged =
    flow.rate_period_ms !== null || (lastGroup !== undefined && lastGroup !== flow.last_group);
  const rows = [
    ...(queueChanged
      ? [{ is_queue: true, group_key: '', last_group: lastGroup ?? flow.last_group, ...queueWindow }]
      : []),
    ...(shares ?? []).flatMap((s) =>
      s.window && byGroup.has(s.group)
        ? [
            {
              is_queue: false,
              group_key: s.group,
              last_group: null,
              ...recorded(s.window.log, s.window.periodMs, at, byGroup.get(s.group)!),
            },
          ]
        : [],
    ),
  ];
  if (rows.length === 0) return;
  await sql`
    INSERT INTO baton.flow_state AS f (queue, is_queue, group_key, last_group, claim_times, claim_counts)
    SELECT ${queue}, (r->>'is_queue')::boolean, r->>'group_key', r->>'last_group',
           ARRAY(SELECT jsonb_array_elements_text(r->'times')::timestamptz),
           ARRAY(SELECT jsonb_array_elements_text(r->'counts')::integer)
    FROM jsonb_array_elements(${JSON.stringify(rows)}::jsonb) AS r
    ON CONFLICT (queue, is_queue, group_key) DO UPDATE SET
      last_group = excluded.last_group, claim_times = excluded.claim_times, claim_counts = excluded.claim_counts`.execute(
    db,
  );
}
