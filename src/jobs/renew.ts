import { type RawBuilder, sql } from 'kysely';
import type { Db } from '../db/database.js';
import { type LeaseOutcome, outcomesOf } from './lease-outcome.js';
import { anySlot, inSlotOf, retryWhenMoved } from './ring.js';

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
 */

export interface RenewItem {
  id: string;
  leaseToken: string;
  leaseMs?: number;
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
 * lease, or why not (lease-outcome.ts). Rows are matched on id and token, so an
 * item with a stale token cannot be answered with another item's success.
 *
 * Rows are locked in id order (the `locked` CTE) before they are updated, so two renew batches
 * naming the same jobs (a worker whose renew timer fired twice) wait for each other instead of
 * deadlocking. The lock also re-checks state and token on the row's newest version, so a lease
 * acked, nacked or re-armed meanwhile is not renewed.
 */
export async function renewLeases(db: Db, items: RenewItem[]): Promise<RenewOutcome[]> {
  // Each renewal looks in its id's slot first; the few it misses look again in every slot (ring.ts).
  const done = new Map<string, RenewedLease>();
  const run = async (batch: RenewItem[], where: RawBuilder<unknown>) => {
    const { rows } = await retryWhenMoved(() => renewStatement(batch, where).execute(db));
    const byLease = new Map(rows.map(({ lease_token, ...row }) => [`${row.id}:${lease_token}`, row]));
    for (const i of batch) {
      const renewed = byLease.get(`${i.id}:${i.leaseToken}`);
      if (renewed) done.set(i.id, renewed);
    }
  };
  await run(items, inSlotOf('j', sql`i.id`));
  const missed = items.filter((i) => !done.has(i.id));
  if (missed.length > 0) await run(missed, anySlot);
  const outcomes: RenewOutcome[] = await outcomesOf(
    db,
    items.map((i) => i.id),
    done,
  );
  const lost = items.filter((_, k) => outcomes[k]!.outcome === 'lease_lost');
  if (lost.length === 0) return outcomes;
  // Which of the misses are still claimed under their token, but past their deadline.
  const { rows } = await sql<{ id: string }>`
    SELECT j.id::text AS id FROM baton.jobs j
    JOIN unnest(${lost.map((i) => i.id)}::bigint[], ${lost.map((i) => i.leaseToken)}::uuid[]) AS r(id, token)
      ON j.id = r.id AND j.lease_token = r.token
    WHERE j.state = 'claimed' AND j.deadline_at <= clock_timestamp()`.execute(db);
  const past = new Set(rows.map((r) => r.id));
  return outcomes.map((out, k) =>
    out.outcome === 'lease_lost' && past.has(items[k]!.id)
      ? { outcome: 'deadline_exceeded', queue: out.queue }
      : out,
  );
}

function renewStatement(items: RenewItem[], where: RawBuilder<unknown>) {
  const input = JSON.stringify(
    items.map((i) => ({ id: i.id, token: i.leaseToken, lease_ms: i.leaseMs ?? null })),
  );
  // `j.id = ANY(ids)` keeps each partition's part a probe of its primary key for just these ids, as
  // in the batch ack (ack.ts): the ring's partitions are truncated and refilled all the time, so
  // their statistics can say "almost empty" and invite a nested loop over every claimed row.
  const ids = items.map((i) => i.id);
  return sql<RenewedLease & { lease_token: string }>`
    WITH input AS (
      SELECT (x->>'id')::bigint AS id, (x->>'token')::uuid AS token, (x->>'lease_ms')::integer AS lease_ms
      FROM json_array_elements(${input}::json) AS x
    ), locked AS (
      SELECT j.slot, j.id, i.lease_ms FROM baton.jobs j JOIN input i ON ${where} AND j.id = i.id
      WHERE j.id = ANY(${ids}::bigint[]) AND j.state = 'claimed' AND j.lease_token = i.token
        AND (j.deadline_at IS NULL OR j.deadline_at > clock_timestamp())
      ORDER BY j.id
      FOR UPDATE OF j
    )
    UPDATE baton.jobs j SET
      lease_ms = coalesce(l.lease_ms, j.lease_ms),
      lease_expires_at = least(clock_timestamp() + coalesce(l.lease_ms, j.lease_ms) * interval '1 millisecond',
                               j.deadline_at)
    FROM locked l
    WHERE j.id = l.id AND j.slot = l.slot
    RETURNING j.id::text AS id, j.queue, j.lease_expires_at, j.lease_ms, j.lease_token`;
}
