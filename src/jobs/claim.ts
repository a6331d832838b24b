import { type RawBuilder, sql } from 'kysely';
import type { Db } from '../db/database.js';
import { StatementShapes } from '../db/statement-shapes.js';
import { claimWithFlow } from './flow-claim.js';
import { groupedPick } from './grouped-claim.js';
import { claimOrder, clearedLease, compareClaimOrder, notExpired } from './job-row.js';
import { heldBackOf, limitedPick } from './limited-claim.js';
import { retryWhenMoved } from './ring.js';

/**
 * Claim: hand up to `maxJobs` ready jobs of one queue to a worker, each under a fresh lease token.
 *
 * One statement. The inner SELECT walks jobs_ready_idx, the partial index that holds only
 * `state = 'ready'` rows in (priority DESC, run_at, id) order, so in-flight, scheduled and
 * finished jobs cost nothing however many there are. baton.jobs is a ring of partitions (ring.ts):
 * the walk is a Merge Append of each partition's index, and the leader truncates emptied slots, so
 * the dead entries it steps over stay few even while vacuum is held back. FOR UPDATE SKIP LOCKED lets concurrent
 * claimers pass over each other's rows instead of queueing behind them, so each job goes to exactly
 * one claimer. A paused queue yields nothing: the `paused` subquery is a one-time filter evaluated
 * before the index is touched.
 *
 * The lease length is the request's, else the queue's, else the server default; it is stored on the
 * row so that a renewal without lease_ms extends by the same length. A job with a budget per attempt
 * (its timeout_ms, else the queue's) gets deadline_at = claimed_at + budget, and its lease is capped
 * there: renewals never pass it (renew.ts) and the re-arm fails the attempt at it. The lease starts at
 * clock_timestamp(), the moment the row is claimed, not now() (the start of the transaction, which
 * on a busy server can be a little earlier than the moment a re-armed job became claimable).
 */

/** One claimant's part of a claim. */
export interface Claimant {
  maxJobs: number;
  /** Requested lease; undefined means the queue's setting. */
  leaseMs?: number;
  workerId?: string;
}

/** A claim on a queue, as a request makes it. */
export interface ClaimRequest extends Claimant {
  queue: string;
}

/** A claim on its own, with the server default lease for queues that set none. */
export interface ClaimOptions extends ClaimRequest {
  defaultLeaseMs: number;
}

export interface ClaimedRow {
  id: string;
  queue: string;
  group_key: string;
  /**
   * The payload as JSON text, as PostgreSQL prints the jsonb: the claim's answer splices it in
   * (http/claim-response.ts), so the server never parses or re-serialises a payload it does not read.
   */
  payload_json: string;
  priority: number;
  attempts: number;
  max_attempts: number;
  lease_token: string;
  lease_expires_at: Date;
  /** When this attempt's budget runs out (claimed_at + timeout), or null without one. */
  deadline_at: Date | null;
  claimed_at: Date;
  run_at: Date;
  created_at: Date;
  /** The job's metadata (baton.jobs.meta), or null. */
  meta: unknown;
}

/** Why a claim of a queue with flow control got fewer jobs than it asked for. */
export type LimitReason = 'concurrency' | 'rate' | 'group_concurrency' | 'group_rate' | 'group_paused';

export interface HeldBack {
  reason: LimitReason;
  /** When a rate limit frees a claim again (undefined: when a claimed job leaves). */
  retryAfterMs?: number;
}

/** One claimant's answer: its jobs, and whether a limit held some back. */
/** What the marker row (claimant <= 0) of a claim statement says (see claimForGroup). */
export const Marker = {
  /** The claim needs the next, more general, statement: grouped, then limited, then the walk. */
  divert: 0,
  /** The queue is not under flow control (any more): the plain claim serves it. */
  notFlowControlled: -1,
  /** A limit held this claim back; the row's meta says which and when to retry (heldBackOf). */
  heldBack: -2,
  /** The queue has groups but no limits or overrides: the grouped claim serves it. */
  grouped: -3,
} as const;

export interface ClaimOutcome {
  jobs: ClaimedRow[];
  heldBack?: HeldBack;
}

export async function claimJobs(db: Db, opts: ClaimOptions): Promise<ClaimedRow[]> {
  return (await claimForGroup(db, opts.queue, opts.defaultLeaseMs, [opts]))[0]!.jobs;
}

/**
 * One statement claiming for several claimants of the same queue at once (see ClaimGroups): the
 * picked rows are numbered in claim order and dealt out in the claimants' order, each getting up to
 * its maxJobs, its own lease length and worker id, and a token per job. Answers each claimant's jobs.
 *
 * A queue under flow control (limits, or jobs in groups) is not claimed by the plain statement: it
 * answers one marker row instead, and the claim tries the grouped statement (grouped-claim.ts), then
 * the limited one (limited-claim.ts), then the walk's transaction (flow-claim.ts), each diverting to
 * the next when the queue needs it. So a queue without flow control pays nothing for it, and one that
 * gets limits has them obeyed from its next claim on, on every replica.
 */
export async function claimForGroup(
  db: Db,
  queue: string,
  defaultLeaseMs: number,
  claimants: Claimant[],
): Promise<ClaimOutcome[]> {
  const total = totalOf(claimants);
  const values: ClaimValues = [queue, defaultLeaseMs, claimantsJsonOf(claimants)];
  let route: Route = routes.get(queue) ?? 'plain';
  for (;;) {
    if (route === 'walk') {
      const { outcomes, next } = await claimWithFlow(db, queue, defaultLeaseMs, claimants);
      remember(queue, next);
      return outcomes;
    }
    const shape: ClaimShape = `${route}:${total}`;
    const { rows } = await retryWhenMoved(() => claims.execute(db, shape, values));
    const marker = rows.find((r) => Number(r.claimant) <= 0);
    switch (marker === undefined ? undefined : Number(marker.claimant)) {
      case undefined:
        return claimOutcomes(rows, claimants);
      case Marker.heldBack:
        return claimOutcomes(rows, claimants, heldBackOf(marker!.meta));
      case Marker.notFlowControlled:
        routes.delete(queue);
        return claimOutcomes(rows, claimants);
      case Marker.grouped:
        remember(queue, 'grouped');
        return claimOutcomes(rows, claimants);
      default:
        // Diverted (nothing claimed): the plain claim sends a grouped or limited queue to the grouped
        // claim, that one a queue with limits or overrides to the limited claim, and that one a queue
        // whose ready jobs have groups to the walk.
        route = route === 'plain' ? 'grouped' : route === 'grouped' ? 'limited' : 'walk';
        remember(queue, route);
    }
  }
}

/** Each claimant's jobs, held back by `heldBack` when it got fewer than it asked for. */
export function claimOutcomes(
  rows: (ClaimedRow & { claimant: string })[],
  claimants: Claimant[],
  heldBack?: HeldBack,
): ClaimOutcome[] {
  return dealt(rows, claimants).map((jobs, i) =>
    heldBack && jobs.length < claimants[i]!.maxJobs ? { jobs, heldBack } : { jobs },
  );
}

/**
 * Which claim each queue took last in this process, for queues under flow control, so that their
 * claims start with the statement that will serve them instead of one that would only divert them.
 * A hint, nothing more: each statement checks the queue's settings and diverts a claim that guessed
 * wrong (a limit set or removed on another replica applies from the next claim), at the cost of one
 * statement.
 */
const routes = new Map<string, Exclude<Route, 'plain'>>();
const ROUTES_KEPT = 10_000;

/** The claims, from the cheapest: plain, grouped (grouped-claim.ts), limited (limited-claim.ts), walk (flow-claim.ts). */
type Route = 'plain' | 'grouped' | 'limited' | 'walk';

function remember(queue: string, route: Exclude<Route, 'plain'>) {
  if (routes.size >= ROUTES_KEPT && !routes.has(queue)) routes.clear();
  routes.set(queue, route);
}

type ClaimValues = [queue: string, defaultLeaseMs: number, claimantsJson: string];
type ClaimShape = `${Exclude<Route, 'walk'>}:${number}`;

/**
 * The claim statements, plain (the fast pick), grouped and limited, each compiled once per total (its
 * LIMITs and quantum are literals) rather than on every claim (db/statement-shapes.ts).
 */
const claims = new StatementShapes((shape: ClaimShape, ...[queue, lease, json]: ClaimValues) => {
  const [route, total] = shape.split(':') as [Exclude<Route, 'walk'>, string];
  const picks = { plain: plainPick, grouped: groupedPick, limited: limitedPick };
  return claimGroupSql(queue, lease, json, picks[route](queue, Number(total)));
});

/**
 * Claimed rows, each claimant's in claim order (UPDATE ... RETURNING does not keep the pick's order).
 * Rows whose claimant is not a claimant (a marker, an acked job of ack-and-claim.ts) are left out.
 */
export function dealt(
  rows: (ClaimedRow & { claimant: string | null })[],
  claimants: Claimant[],
): ClaimedRow[][] {
  const out: ClaimedRow[][] = claimants.map(() => []);
  // The row keeps its claimant column: copying every row without it cost an object per job.
  for (const row of rows) if (Number(row.claimant) > 0) out[Number(row.claimant) - 1]!.push(row);
  for (const list of out) list.sort(compareClaimOrder);
  return out;
}

/** The claim statement for one claimant (exported so tests and benchmarks can EXPLAIN it). */
export function claimStatement(opts: ClaimOptions) {
  return claimGroupStatement(opts.queue, opts.defaultLeaseMs, [opts], {
    pick: fastPick(opts.queue, totalOf([opts])),
  });
}

/** The claim statement of a grouped queue without limits (grouped-claim.ts), for tests and benchmarks. */
export function groupedClaimStatement(opts: ClaimOptions) {
  return claimGroupStatement(
    opts.queue,
    opts.defaultLeaseMs,
    [opts],
    groupedPick(opts.queue, totalOf([opts])),
  );
}

export const totalOf = (claimants: Claimant[]) => claimants.reduce((n, c) => n + batchLimit(c.maxJobs), 0);

/** The plain claim's plan: the fast pick alone. */
const plainPick = (queue: string, total: number): PickPlan => ({ pick: fastPick(queue, total) });

/**
 * The pick of a queue without flow control: the first ready jobs in claim order, straight off the
 * ready index. `flow` (from the settings CTE) stops it before it reads the index.
 */
function fastPick(queue: string, total: number) {
  return sql`
    SELECT j.slot, j.id, j.priority, j.run_at FROM baton.jobs j
    WHERE j.queue = ${queue} AND j.state = 'ready' AND NOT (SELECT paused OR flow FROM settings) AND ${notExpired('j')}
    ORDER BY ${claimOrder('j')}
    LIMIT ${sql.lit(total)}
    FOR UPDATE SKIP LOCKED`;
}

/** What the claim statement is built around (claimGroupStatement): the plain, grouped and flow picks. */
export interface PickPlan {
  /** CTEs placed after `settings` and before `picked` (the statement becomes WITH RECURSIVE). */
  before?: RawBuilder<unknown>;
  /** CTE `picked`: slot, id, priority and run_at of locked ready rows, in any order. */
  pick: RawBuilder<unknown>;
  /** CTEs placed after `claimed`: a data-modifying one runs whether or not anything reads it. */
  after?: RawBuilder<unknown>;
  /** The marker row's claimant (a Marker), evaluated over `settings` (NULL: no marker row). */
  marker?: RawBuilder<unknown>;
  /** The marker row's meta column (default NULL). */
  markerMeta?: RawBuilder<unknown>;
}

/**
 * The claim statement around a pick (PickPlan; CTE `picked`: slot, id, priority, run_at of locked
 * ready rows, in any order): number the picked rows in claim order, deal them to the claimants, claim
 * them. With the fast pick, a queue under flow control answers one row with claimant 0 (the marker)
 * and claims nothing.
 */
export function claimGroupStatement(
  queue: string,
  defaultLeaseMs: number,
  claimants: Claimant[],
  plan: PickPlan,
) {
  return claimGroupSql(queue, defaultLeaseMs, claimantsJsonOf(claimants), plan);
}

/** Absent settings are left out (not null): ->> reads them as NULL either way. */
const claimantsJsonOf = (claimants: Claimant[]) =>
  JSON.stringify(claimants.map((c) => ({ n: c.maxJobs, lease_ms: c.leaseMs, worker_id: c.workerId })));

function claimGroupSql(queue: string, defaultLeaseMs: number, claimantsJson: string, plan: PickPlan) {
  const marker =
    plan.marker ??
    sql`CASE WHEN flow AND NOT EXISTS (SELECT 1 FROM claimed) THEN ${sql.lit(Marker.divert)} END`;
  const markerMeta = plan.markerMeta ?? sql`NULL::jsonb`;
  return sql<ClaimedRow & { claimant: string }>`
    WITH ${plan.before ? sql`RECURSIVE ` : sql``}settings AS (
      SELECT ${queueClaimSettings('queues', defaultLeaseMs)}, coalesce(bool_or(${limited('queues')}), false) AS limited
      FROM baton.queues WHERE name = ${queue}
    ), ${plan.before ? sql`${plan.before}, ` : sql``}picked AS (
      ${plan.pick}
    ), claimants AS (
      SELECT c.ord AS claimant, (c.item->>'n')::integer AS n, (c.item->>'lease_ms')::integer AS lease_ms,
             c.item->>'worker_id' AS worker_id, sum((c.item->>'n')::integer) OVER (ORDER BY c.ord) AS upto
      FROM json_array_elements(${claimantsJson}::json) WITH ORDINALITY AS c(item, ord)
    ), assigned AS (
      SELECT p.id, p.slot, cl.claimant, coalesce(cl.lease_ms, st.lease_ms) AS lease_ms, cl.worker_id,
             st.timeout_ms, clock_timestamp() AS at
      FROM (SELECT id, slot, row_number() OVER (ORDER BY ${claimOrder('picked')}) AS rn FROM picked) p
      JOIN claimants cl ON p.rn > cl.upto - cl.n AND p.rn <= cl.upto
      CROSS JOIN settings st
    ), ${claimedFromAssigned}${plan.after ? sql`, ${plan.after}` : sql``}
    SELECT * FROM claimed
    UNION ALL
    SELECT m.claimant, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, m.meta
    FROM (SELECT ${marker} AS claimant, ${markerMeta} AS meta FROM settings) m WHERE m.claimant IS NOT NULL`;
}

/**
 * CTE `claimed`: the UPDATE that claims the rows of CTE `assigned` (id, slot, claimant, lease_ms,
 * worker_id, timeout_ms, at), each under a fresh token. Shared by every claim statement, ack-and-claim
 * (ack-and-claim.ts) included, so a lease is computed in one place.
 */
export const claimedFromAssigned = sql`claimed AS (
      UPDATE baton.jobs j SET
        state = 'claimed',
        attempts = j.attempts + 1,
        lease_token = gen_random_uuid(),
        lease_ms = a.lease_ms,
        -- The lease never runs past the attempt's deadline (least() ignores a NULL one), so the re-arm
        -- fails the attempt at its deadline.
        lease_expires_at = least(a.at + a.lease_ms * interval '1 millisecond',
                                 a.at + coalesce(j.timeout_ms, a.timeout_ms) * interval '1 millisecond'),
        deadline_at = a.at + coalesce(j.timeout_ms, a.timeout_ms) * interval '1 millisecond',
        claimed_at = a.at,
        worker_id = a.worker_id
      FROM assigned a
      WHERE j.id = a.id AND j.slot = a.slot AND j.state = 'ready'
      RETURNING a.claimant, j.id, j.queue, j.group_key, j.payload::text AS payload_json, j.priority,
                j.attempts, j.max_attempts, j.lease_token, j.lease_expires_at, j.deadline_at, j.claimed_at, j.run_at,
                j.created_at, j.meta
    )`;

/**
 * What a claim reads from a queue's row (alias), as aggregates so that a queue without a row still
 * answers one: paused, the lease length (the queue's, else the server default), the attempt budget,
 * and whether flow control serves it (grouped or limited). Shared by every claim statement.
 */
export function queueClaimSettings(alias: string, defaultLeaseMs: unknown) {
  const col = (c: string) => sql.ref(`${alias}.${c}`);
  return sql`coalesce(bool_or(${col('paused')}), false) AS paused,
    coalesce(max(${col('lease_ms')}), ${defaultLeaseMs}::integer) AS lease_ms,
    max(${col('timeout_ms')}) AS timeout_ms,
    coalesce(bool_or(${col('grouped')} OR ${limited(alias)}), false) AS flow`;
}

/**
 * Whether a queue row (alias) has limits. A queue is under flow control when it has limits or has
 * had jobs in groups (which are then served in turn).
 */
function limited(alias: string) {
  const q = sql.ref(alias);
  return sql`(${q}.concurrency_limit IS NOT NULL OR ${q}.rate_limit IS NOT NULL
    OR ${q}.group_concurrency_limit IS NOT NULL OR ${q}.group_rate_limit IS NOT NULL)`;
}

/**
 * The LIMIT goes into the text as a literal, not a parameter. With a parameter, PostgreSQL's plan
 * cache prices a generic plan for an unknown row count, finds it dearer than a custom plan and so
 * re-plans the claim on every execution (pg_prepared_statements.generic_plans stayed 0); with the
 * literal it settles on the generic plan like every other hot statement. Clients use few distinct
 * batch sizes, so this adds few statement texts.
 */
function batchLimit(maxJobs: number): number {
  if (!Number.isSafeInteger(maxJobs) || maxJobs < 1)
    throw new Error(`maxJobs must be a positive integer, got ${maxJobs}`);
  return maxJobs;
}

/**
 * Give claimed jobs back as if never claimed: used when the client of a long-poll went away
 * before it could receive them. The attempt is not counted. Guarded by the lease token, so a job
 * already acked, re-armed or re-claimed is left alone.
 */
export async function releaseClaims(db: Db, claims: { id: string; lease_token: string }[]): Promise<number> {
  if (claims.length === 0) return 0;
  const result = await retryWhenMoved(() =>
    sql`
      UPDATE baton.jobs j SET state = 'ready', attempts = j.attempts - 1, ${clearedLease},
             claimed_at = NULL, worker_id = NULL
      FROM unnest(${claims.map((c) => c.id)}::bigint[], ${claims.map((c) => c.lease_token)}::uuid[]) AS r(id, token)
      WHERE j.id = r.id AND j.state = 'claimed' AND j.lease_token = r.token`.execute(db),
  );
  return Number(result.numAffectedRows ?? 0);
}
