import type { Db } from '../db/database.js';
import { invalidField } from '../errors.js';
import { queuesOfJobs } from './read.js';

/**
 * What became of a write guarded by a lease (renew, ack, nack): done, or why not. A write that
 * matched no row missed for one of two reasons, and callers answer them differently: the job exists
 * but is no longer claimed under this token (`lease_lost`: the lease expired and was re-armed, the
 * job was finished or cancelled, or the token is wrong), or no such job exists (`not_found`).
 */
export type LeaseOutcome<T> =
  | { outcome: 'done'; value: T }
  | { outcome: 'lease_lost'; queue: string }
  | { outcome: 'not_found' };

/** Each id's outcome, given what the guarded write did (by id); one read explains all the misses. */
export async function outcomesOf<T>(db: Db, ids: string[], done: Map<string, T>): Promise<LeaseOutcome<T>[]> {
  const queues = await queuesOfJobs(
    db,
    ids.filter((id) => !done.has(id)),
  );
  return ids.map((id): LeaseOutcome<T> => {
    if (done.has(id)) return { outcome: 'done', value: done.get(id)! };
    const queue = queues.get(id);
    return queue === undefined ? { outcome: 'not_found' } : { outcome: 'lease_lost', queue };
  });
}

/**
 * The items of a batch (`acks`, `renewals`) each name a job once: outcomes are keyed by id, and two
 * outcomes for one job would be ambiguous. A repeat is a 400 naming the item. Ids are canonical (no
 * leading zeros), so "1" and "01" cannot pass as two jobs.
 */
export function checkDistinctIds(field: string, items: { id: string }[]): void {
  const seen = new Set<string>();
  for (const [i, item] of items.entries()) {
    if (seen.has(item.id)) throw invalidField(`${field}[${i}].id`, `repeats job ${item.id}`);
    seen.add(item.id);
  }
}

/**
 * The one queue of a batch ack that asks for the next jobs (ack-and-claim): its items' queue, or
 * undefined when none of them exists. Checked before anything is acked, so a batch spanning queues is
 * a 400 naming the first item of another queue and nothing half-happens. `field` is the list's name;
 * ids in `unseen` (jobs the caller may not see) count as not existing.
 */
export async function queueOfBatch(
  db: Db,
  field: string,
  ids: string[],
  unseen?: ReadonlySet<string>,
): Promise<string | undefined> {
  const queues = await queuesOfJobs(db, unseen?.size ? ids.filter((id) => !unseen.has(id)) : ids);
  let first: { queue: string; at: number } | undefined;
  for (const [i, id] of ids.entries()) {
    const queue = unseen?.has(id) ? undefined : queues.get(id);
    if (queue === undefined) continue;
    if (!first) first = { queue, at: i };
    else if (queue !== first.queue) {
      throw invalidField(
        `${field}[${i}].id`,
        `is a job of queue "${queue}", not "${first.queue}" as ${field}[${first.at}]: with next, every ` +
          'acked job must be of the one queue the next jobs are claimed from',
      );
    }
  }
  return first?.queue;
}
