import { sql } from 'kysely';
import type { Db } from '../../db/database.js';
import { StatementShapes } from '../../db/statement-shapes.js';
import { retryWhenMoved } from '../ring.js';
import type { ClaimFloor, ClaimFloors } from './floors.js';
import { claimWithFlow } from './flow.js';
import { groupedPick } from './grouped.js';
import { limitedPick } from './limited.js';
import { plainPick, plainPickFrom } from './plain.js';
import {
  type ClaimStatementRow,
  claimantsJsonOf,
  claimOutcomes,
  claimStatementSql,
  heldBackOf,
  type PickPlan,
  Signal,
  signalRowOf,
  totalOf,
} from './statement.js';
import type { Claimant, ClaimedRow, ClaimOptions, ClaimOutcome, HeldBack, Route } from './types.js';

/**
 * Claim: hand up to `maxJobs` ready jobs of one queue to a worker, each under a fresh lease token, in
 * one statement (statement.ts); several claimants of the same queue at once share it (ClaimGroups in
 * statement-groups.ts). This file picks the statement that serves the queue, from CLAIMS below.
 */

/**
 * The claims, one per kind of queue, most specific first: which queue settings each serves, its
 * pick, and the claim a queue it cannot serve goes on to. A statement that finds its queue needs a
 * more general claim claims nothing and says so (Signal.divert, statement.ts), so a limit set on
 * another replica applies from the next claim; the queue's next claim starts where this one ended
 * (hints, below), so a queue pays for the diversion once, not on every claim.
 *
 * | claim   | serves a queue with                                     | pick       | else |
 * |---------|---------------------------------------------------------|------------|------|
 * | plain   | no limits, and never jobs in groups                     | plain.ts   | grouped |
 * | grouped | jobs in groups; no limits, no group overrides           | grouped.ts | limited |
 * | limited | limits or group overrides; no ready job in a group      | limited.ts | walk |
 * | walk    | limits or overrides, and ready jobs in groups           | flow.ts    | (a transaction) |
 *
 * Why four, and what each costs against the plain one: docs/adr/0008-claim-statements.md.
 */
const CLAIMS = {
  plain: { pick: plainPick, else: 'grouped' },
  grouped: { pick: groupedPick, else: 'limited' },
  limited: { pick: limitedPick, else: 'walk' },
} as const satisfies Record<
  StatementRoute,
  { pick: (queue: string, total: number) => PickPlan; else: Route }
>;

export async function claimJobs(db: Db, opts: ClaimOptions, floors?: ClaimFloors): Promise<ClaimedRow[]> {
  return (await claimForGroup(db, opts.queue, opts.defaultLeaseMs, [opts], floors))[0]!.jobs;
}

/**
 * One claim for several claimants of the same queue at once (see ClaimGroups): the picked rows are
 * dealt out in the claimants' order, each getting up to its maxJobs, its own lease length and worker
 * id, and a token per job. Answers each claimant's jobs. A plain claim of a queue with a floor
 * (`floors`, floors.ts: readers of the job table pin its dead entries) starts its walk there.
 */
export async function claimForGroup(
  db: Db,
  queue: string,
  defaultLeaseMs: number,
  claimants: Claimant[],
  floors?: ClaimFloors,
): Promise<ClaimOutcome[]> {
  const total = totalOf(claimants);
  const values: ClaimValues = [queue, defaultLeaseMs, claimantsJsonOf(claimants)];
  let current: Route = hints.get(queue) ?? 'plain';
  for (;;) {
    if (current === 'walk') {
      const { outcomes, next } = await claimWithFlow(db, queue, defaultLeaseMs, claimants);
      hint(queue, next);
      return outcomes;
    }
    const floor = current === 'plain' ? floors?.get(queue) : undefined;
    const shape: ClaimShape = `${current}:${total}`;
    const { rows } = await retryWhenMoved(() =>
      floor
        ? fromFloor.execute(db, `${total}`, [...values, floor.priority, floor.runAt])
        : statements.execute(db, shape, values),
    );
    const step = route(current, signalRowOf(rows));
    if (step.outcome === 'diverted') {
      current = step.to;
      hint(queue, current);
      continue;
    }
    if (step.nextTime) hint(queue, step.nextTime);
    return claimOutcomes(rows, claimants, step.heldBack);
  }
}

/** The claims that are one statement each (the walk is a transaction: flow.ts). */
type StatementRoute = Exclude<Route, 'walk'>;

/** What a claim does once a statement has answered: return what it claimed, or go on to another route. */
type Step =
  /** The statement served the queue; `nextTime`: where the queue's next claim starts (else as now). */
  | { outcome: 'served'; heldBack?: HeldBack; nextTime?: Route }
  /** The statement claimed nothing: the queue needs route `to`, now and on its next claims. */
  | { outcome: 'diverted'; to: Route };

/**
 * Where a claim goes once the statement of `from` has answered: what its signal row said (statement.ts,
 * Signal; no signal row: served as asked) means for this claim and for the queue's next one.
 */
function route(from: StatementRoute, signalRow: ClaimStatementRow | undefined): Step {
  const signal = signalRow?.signal ?? null;
  switch (signal) {
    case null:
      return { outcome: 'served' };
    case Signal.heldBack:
      return { outcome: 'served', heldBack: heldBackOf(signalRow!.meta) };
    case Signal.plain:
      return { outcome: 'served', nextTime: 'plain' };
    case Signal.grouped:
      return { outcome: 'served', nextTime: 'grouped' };
    case Signal.divert:
      return { outcome: 'diverted', to: CLAIMS[from].else };
  }
}

/**
 * Which claim each queue under flow control took last in this process, so that its claims start with
 * the statement that will serve them instead of one that would only divert them. A hint, nothing
 * more: each statement checks the queue's settings and diverts a claim that guessed wrong (a limit set
 * or removed on another replica applies from the next claim), at the cost of one statement. A queue
 * without one starts plain.
 */
const hints = new Map<string, Exclude<Route, 'plain'>>();
const HINTS_KEPT = 10_000;

function hint(queue: string, route: Route) {
  if (route === 'plain') {
    hints.delete(queue);
    return;
  }
  if (hints.size >= HINTS_KEPT && !hints.has(queue)) hints.clear();
  hints.set(queue, route);
}

type ClaimValues = [queue: string, defaultLeaseMs: number, claimantsJson: string];
type ClaimShape = `${StatementRoute}:${number}`;

/**
 * The claim statements, plain, grouped and limited, each compiled once per total (its LIMITs and
 * quantum are literals) rather than on every claim (db/statement-shapes.ts).
 */
const statements = new StatementShapes((shape: ClaimShape, ...[queue, lease, json]: ClaimValues) => {
  const [route, total] = shape.split(':') as [StatementRoute, string];
  return claimStatementSql(queue, lease, json, CLAIMS[route].pick(queue, Number(total)));
});

/** The plain claim from a floor (plainPickFrom), compiled once per total. */
const fromFloor = new StatementShapes(
  (total: `${number}`, ...[queue, lease, json, priority, runAt]: FloorClaimValues) =>
    claimStatementSql(
      queue,
      lease,
      json,
      plainPickFrom(queue, Number(total), sql`${priority}`, sql`${runAt}`),
    ),
);

type FloorClaimValues = [...ClaimValues, priority: number, runAt: string];

/** The statement of `route` for one claim (for tests and benchmarks, which EXPLAIN and run it). */
export function claimStatement(opts: ClaimOptions, route: StatementRoute = 'plain') {
  return claimStatementSql(
    opts.queue,
    opts.defaultLeaseMs,
    claimantsJsonOf([opts]),
    CLAIMS[route].pick(opts.queue, totalOf([opts])),
  );
}

/** The plain claim from a floor (for tests and benchmarks, which EXPLAIN and run it). */
export function claimStatementFrom(opts: ClaimOptions, floor: ClaimFloor) {
  return claimStatementSql(
    opts.queue,
    opts.defaultLeaseMs,
    claimantsJsonOf([opts]),
    plainPickFrom(opts.queue, totalOf([opts]), sql`${floor.priority}`, sql`${floor.runAt}`),
  );
}
