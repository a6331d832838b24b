import type { Db } from '../../db/database.js';
import { invalidField } from '../../errors.js';
import { MAX_EDGES_PER_REQUEST } from '../limits.js';
import { refuseBornExpired } from './expiry-rule.js';
import type { EnqueueItem } from './item.js';

/**
 * What every enqueue refuses before it writes, whichever protocol sent it: fields that exclude or
 * need each other, a batch item naming a later one (or any item, outside a batch), too many edges in
 * one request, and a job that could never run (expiry-rule.ts). Each a 400 naming the field under
 * `field(i)` (`''` for a single enqueue, `jobs[3].` for a batch item). The protocols only translate
 * their fields into items; the rules live here once.
 */
export async function checkEnqueue(
  db: Db,
  items: EnqueueItem[],
  field: (index: number) => string,
  /** A batch request: only its items may name earlier items as parents. */
  batch: boolean,
): Promise<void> {
  let edges = 0;
  items.forEach((item, i) => {
    checkItem(item, field(i), batch ? i : undefined);
    edges += item.dependsOn?.length ?? 0;
  });
  if (edges > MAX_EDGES_PER_REQUEST) {
    throw invalidField('jobs', `name ${edges} parents in all; at most ${MAX_EDGES_PER_REQUEST} per request`);
  }
  await refuseBornExpired(db, items, field);
}

/** `position`: the item's index in a batch (earlier items may be its parents); undefined outside one. */
function checkItem(item: EnqueueItem, field: string, position: number | undefined): void {
  if (item.delayMs !== undefined && item.runAt !== undefined) {
    throw invalidField(`${field}run_at`, 'cannot be given with delay_ms');
  }
  if (item.expiresAt !== undefined && item.expiresInMs !== undefined) {
    throw invalidField(`${field}expires_in_ms`, 'cannot be given with expires_at');
  }
  if (item.onConflict !== undefined && item.uniqueKey === undefined) {
    throw invalidField(`${field}on_conflict`, 'needs unique_key');
  }
  if (item.dependsOn === undefined) {
    if (item.onParentFailure !== undefined)
      throw invalidField(`${field}on_parent_failure`, 'needs depends_on');
    return;
  }
  item.dependsOn.forEach((parent, k) => {
    if (!('item' in parent)) return;
    if (position === undefined) {
      throw invalidField(`${field}depends_on[${k}]`, 'names a batch item, which only a batch request has');
    }
    if (parent.item >= position) {
      throw invalidField(
        `${field}depends_on[${k}].item`,
        `must name an earlier item of the batch (below ${position})`,
      );
    }
  });
}
