import { type RawBuilder, sql } from 'kysely';
import type { Db } from '../db/database.js';
import { StatementShapes } from '../db/statement-shapes.js';
import { givenProgress, inScope, leaseHeld } from './job-row.js';
import { type LeaseOutcome, outcomesOf, type ScopedId } from './lease-outcome.js';
import { inSlotShape, retryWhenMoved, type SlotShape, slotShapeOf } from './ring.js';

/**
 * Renew: push a lease's expiry forward. It succeeds only while the job is still `claimed` under the
 * presented token, so a worker whose lease was re-armed and handed to someone else cannot extend it.
 *
 * A job with a budget per attempt (deadline_at, set at claim) is never renewed past it: the new
 * expiry is capped at the deadline, and once the deadline has passed a renewal is refused with
 * `deadline_exceeded` (the attempt is over; the re-arm fails it, or already has).
 *
 * The UPDATE changes only lease_expires_at and lease_ms. Neither is in any index and the table has
 * free space on each page (fillfactor 70), so PostgreSQL can do it as a HOT update: no index entry
 * is written, however often workers renew.
 *
 * A renewal may carry the worker's progress (any JSON, latest wins). Only a batch in which some item
 * carries it runs the statement that writes the column (its own shape, `progress:<slot>`), so a
 * renewal without progress sends the same statement as before. `progress` is in no index either: its
 * update stays HOT while the grown row still fits on its page.
 */

export interface RenewItem extends ScopedId {
  leaseToken: string;
  leaseMs?: number;
  /** The progress to keep, as JSON text ('null' clears it); undefined keeps what the job has. */
  progressJson?: string;
}

export interface RenewedLease {
  id: string;
  queue: string;
  lease_expires_at: Date;
  lease_ms: number;
}

/** A renewal's outcome: a lease outcome, or refused because the attempt's deadline has passed. */
export type RenewOutcome = LeaseOutcome<RenewedLease> | { outcome: 'deadline_exceeded'; queue: string };

/** Renew one lease (a batch of one: the same guarded, HOT-eligible statement). */
export async function renewLease(db: Db, item: RenewItem): Promise<RenewOutcome> {
  return (await renewLeases(db, [item]))[0]!;
}

/**
 * Renew many leases in one statement (a worker holding a claimed batch renews it in one request).
 * The same guarded, HOT-eligible update as renewLease(), per item; answers item by item the renewed
 * lease, or why not (lease-outcome.ts). Each row is matched to its own item's token, so an item
 * with a stale token cannot be answered with another item's success.
 *
 * Rows are locked in id order (the `locked` CTE) before they are updated, so two renew batches
 * naming the same jobs (a worker whose renew timer fired twice) wait for each other instead of
 * deadlocking. The lock also re-checks state and token on the row's newest version, so a lease
 * acked, nacked or re-armed meanwhile is not renewed.
 */
export async function renewLeases(db: Db, items: RenewItem[]): Promise<RenewOutcome[]> {
  // Each renewal looks in its id's slot first (when the batch's ids share one, ring.ts's SlotShape);
  // the few it misses look again in every slot, since the leader may have carried a long-running job.
  if (new Set(items.map((i) => i.id)).size !== items.length) {
    throw new Error('renewLeases: each job may be named once (the callers check it)');
  }
  const done = new Map<string, RenewedLease>();
  const run = async (batch: RenewItem[], slots: SlotShape) => {
    const values: RenewValues = [
      batch.map((i) => i.id),
      batch.map((i) => i.leaseToken),
      batch.map((i) => i.leaseMs ?? null),
      batch.map((i) => i.queue ?? null),
    ];
    const { rows } = await retryWhenMoved(() =>
      batch.some((i) => i.progressJson !== undefined)
        ? progressStatements.execute(db, slots, [...values, batch.map((i) => i.progressJson ?? null)])
        : renewStatements.execute(db, slots, values),
    );
    for (const row of rows) done.set(row.id, row);
  };
  const slots = slotShapeOf(items.map((i) => i.id));
  await run(items, slots);
  const missed = items.filter((i) => !done.has(i.id));
  if (missed.length > 0 && slots !== 'any') await run(missed, 'any');
  const outcomes: RenewOutcome[] = await outcomesOf(db, items, done);
  const lost = items.filter((_, k) => outcomes[k]!.outcome === 'lease_lost');
  if (lost.length === 0) return outcomes;
  // Which of the misses are still claimed under their token, but past their deadline.
  const lostIds = sql`${lost.map((i) => i.id)}::bigint[]`;
  const { rows } = await sql<{ id: string }>`
    SELECT j.id::text AS id FROM baton.jobs j
    WHERE j.id = ANY(${lostIds})
      AND ${leaseHeld('j', sql`(${lost.map((i) => i.leaseToken)}::uuid[])[array_position(${lostIds}, j.id)]`)}
      AND ${inScope('j', sql`(${lost.map((i) => i.queue ?? null)}::text[])[array_position(${lostIds}, j.id)]`)}
      AND j.deadline_at <= clock_timestamp()`.execute(db);
  const past = new Set(rows.map((r) => r.id));
  return outcomes.map((out, k) =>
    out.outcome === 'lease_lost' && past.has(items[k]!.id)
      ? { outcome: 'deadline_exceeded', queue: out.queue }
      : out,
  );
}

/** The statement's values by item: ids, lease tokens, lease lengths (null: keep the lease's own), scopes. */
type RenewValues = [ids: string[], tokens: string[], leaseMs: (number | null)[], queues: (string | null)[]];

/** With each item's progress as JSON text (null: keep the job's). */
type ProgressValues = [...RenewValues, progress: (string | null)[]];

/** Compiled once per slot (db/statement-shapes.ts, ring.ts's SlotShape). */
const renewStatements = new StatementShapes((slots: SlotShape, ...values: RenewValues) =>
  renewStatement(values, slots),
);

/** The same renewal writing progress too, for batches that carry some; compiled once per slot. */
const progressStatements = new StatementShapes(
  (slots: SlotShape, ...[ids, tokens, leaseMs, queues, progress]: ProgressValues) => {
    // An item without progress keeps the job's; JSON null clears it.
    const at = sql`array_position(${sql`${ids}::bigint[]`}, j.id)`;
    const given = sql`(${progress}::text[])[${at}]`;
    return renewStatement([ids, tokens, leaseMs, queues], slots, {
      progress: givenProgress(given, sql`j.progress`),
    });
  },
);

function renewStatement(
  [ids, tokens, leaseMs, queues]: RenewValues,
  slots: SlotShape,
  also: { progress?: RawBuilder<unknown> } = {},
) {
  // As in the batch ack (ack.ts): the primary key of the batch's slot (every slot's, for 'any') is
  // probed for the batch's ids (`j.id = ANY`), and each row found is matched to its item by position
  // (array_position), not joined to the items. Joined, with the state in the WHERE, the planner read
  // every claimed row of each partition from jobs_claimed_idx and compared each with every item, and
  // threw nearly all of those rows away (docs/benchmarks.md, "What was tried and what it gave", row
  // "Batch renew matched by position"). The token alone says the job is claimed (leaseHeld). Ids are
  // distinct: the route refuses a batch naming a job twice.
  const idList = sql`${ids}::bigint[]`;
  const at = sql`array_position(${idList}, j.id)`;
  // Without progress the statement's text is the renewal's as it always was.
  const setProgress = also.progress
    ? sql`
      progress = ${also.progress},`
    : sql``;
  return sql<RenewedLease>`
    WITH locked AS (
      SELECT j.slot, j.id FROM baton.jobs j
      WHERE j.id = ANY(${idList}) AND ${inSlotShape('j', slots)}
        AND ${leaseHeld('j', sql`(${tokens}::uuid[])[${at}]`)} AND ${inScope('j', sql`(${queues}::text[])[${at}]`)}
        AND (j.deadline_at IS NULL OR j.deadline_at > clock_timestamp())
      ORDER BY j.id
      FOR UPDATE OF j
    )
    UPDATE baton.jobs j SET${setProgress}
      lease_ms = coalesce((${leaseMs}::integer[])[${at}], j.lease_ms),
      lease_expires_at = least(clock_timestamp() + coalesce((${leaseMs}::integer[])[${at}], j.lease_ms) * interval '1 millisecond',
                               j.deadline_at)
    FROM locked l
    WHERE j.id = l.id AND j.slot = l.slot
    RETURNING j.id::text AS id, j.queue, j.lease_expires_at, j.lease_ms`;
}
