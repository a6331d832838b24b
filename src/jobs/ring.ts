import { type RawBuilder, sql } from 'kysely';
import { isMovedRowError } from '../db/errors.js';

/**
 * Where live jobs are (migrations/0004_storage_ring.ts):
 * - ready and claimed jobs in baton.jobs, a ring of RING_SLOTS partitions; a job's slot is
 *   baton.job_slot(id): IDS_PER_SLOT consecutive ids per slot. The leader empties sealed slots with
 *   TRUNCATE (maintenance/ring.ts), so dead row versions cannot pile up where claims read, even while
 *   a transaction holds vacuum back;
 * - scheduled jobs in baton.scheduled_jobs, until the promoter moves them into the ring;
 * - finished jobs in baton.job_history.
 *
 * Every statement that names a live job by id says which slot to look in (`inSlotOf`), so it probes
 * one partition. A claimed job running longer than its slot lives is carried into the current slot
 * by the leader (an UPDATE of `slot`): a write that names it by its id's slot then misses it, and
 * looks again in every slot (`anySlot`) before answering lease_lost; a write that was waiting for the
 * row while it moved fails with 40001 and is run again (`retryWhenMoved`).
 */

/** Must match baton.job_slot() in migrations/0004_storage_ring.ts (a test checks). */
export const RING_SLOTS = 8;
export const IDS_PER_SLOT = 4096;

/** `<alias>.slot = baton.job_slot(<id>)`: the partition a job starts in, for run-time pruning. */
export function inSlotOf(alias: string, id: RawBuilder<unknown>) {
  return sql`${sql.ref(alias)}.slot = baton.job_slot(${id})`;
}

/** The slots these ids start in: baton.job_slot of each, computed here (slotShapeOf). */
export function slotsOf(ids: string[]): number[] {
  const slots = new Set<number>();
  for (const id of ids) slots.add(Number((BigInt(id) / BigInt(IDS_PER_SLOT)) % BigInt(RING_SLOTS)));
  return [...slots];
}

/**
 * Where a statement naming many jobs by id (the batch ack, the batch renew) looks for them: the one
 * slot they all start in, or every slot ('any': jobs spread over several slots, or looking again for
 * jobs the leader carried). The slot goes into the statement's text as a literal (its shape,
 * db/statement-shapes.ts), so even the generic plan holds only that partition: PostgreSQL 15 does not
 * prune the partitions of an UPDATE or DELETE by a parameter, and with `slot = ANY($slots)` every
 * execution locked and probed all of them (docs/benchmarks.md, "What was tried and what it gave", row
 * "Slot as a literal"). Nine texts per statement at most, so nine cached plans per connection.
 */
export type SlotShape = `${number}` | 'any';

export function slotShapeOf(ids: string[]): SlotShape {
  const slots = slotsOf(ids);
  return slots.length === 1 ? `${slots[0]!}` : 'any';
}

/** The condition of a SlotShape on `<alias>.slot`, a literal (or none, for 'any'). */
export function inSlotShape(alias: string, shape: SlotShape) {
  return shape === 'any' ? anySlot : sql`${sql.ref(alias)}.slot = ${sql.lit(Number(shape))}`;
}

/** No slot condition: every partition's primary key is probed (for rows the leader carried). */
export const anySlot = sql`true`;

/**
 * Run a statement again when a row it waited for was carried to another slot meanwhile (SQLSTATE
 * 40001, "tuple to be locked was already moved to another partition"). The new run reads the row
 * where it now is. Carries are rare (long-running jobs, once per slot), so a few tries suffice.
 */
export async function retryWhenMoved<T>(run: () => Promise<T>, tries = 5): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await run();
    } catch (err) {
      if (attempt >= tries || !isMovedRowError(err)) throw err;
    }
  }
}
