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

/**
 * A job named by id, and the queue the caller may act on: undefined for any (a key without queue
 * limits), else the statement matches the job only in that queue (job-row.ts's inScope).
 */
export interface ScopedId {
  id: string;
  queue?: string;
}

/**
 * Each item's outcome, given what the guarded write did (by id); one read explains all the misses. A
 * job outside the item's queue is `not_found`, exactly like one that never existed.
 */
export async function outcomesOf<T>(
  db: Db,
  items: readonly ScopedId[],
  done: Map<string, T>,
): Promise<LeaseOutcome<T>[]> {
  const queues = await queuesOfJobs(
    db,
    items.filter((item) => !done.has(item.id)).map((item) => item.id),
  );
  return items.map(({ id, queue: scope }): LeaseOutcome<T> => {
    if (done.has(id)) return { outcome: 'done', value: done.get(id)! };
    const queue = queues.get(id);
    return queue === undefined || (scope !== undefined && queue !== scope)
      ? { outcome: 'not_found' }
      : { outcome: 'lease_lost', queue };
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
 * `scope`, for a queue-limited key, holds the queues of the jobs it may see (the others count as not
 * existing).
 */
export async function queueOfBatch(
  db: Db,
  field: string,
  ids: string[],
  scope?: ReadonlyMap<string, string>,
): Promise<string | undefined> {
  const queues = scope ?? (await queuesOfJobs(db, ids));
  let first: { queue: string; at: number } | undefined;
  for (const [i, id] of ids.entries()) {
    const queue = queues.get(id);
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
