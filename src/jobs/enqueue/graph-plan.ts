import type { EnqueueItem, ParentFailurePolicy, ParentRef } from './item.js';
import type { Outcome, Parent } from './parents.js';

/**
 * What becomes of each item of a request with parents (with-parents.ts, step 3), decided in request
 * order from its parents' outcomes so far; a batch item names only earlier items, so no cycle can be
 * written. A failed parent under `cancel`: cancelled at once (reason `parent_failed`; a redrive of the
 * parent brings it back). Else, parents still live: it waits, `pending` counting them. Else it runs
 * as any job does. Nothing here reads the database.
 */

/** run: enqueued as any job; waiting: for its parents; cancelled: a parent failed; answered: by a key. */
export type Disposition = 'run' | 'waiting' | 'cancelled' | 'answered';

/** One edge (child, parent) as baton.job_edges stores it, resolved already for a finished parent. */
export interface EdgeRow {
  child: string;
  parent: string;
  child_queue: string;
  parent_queue: string;
  on_parent_failure: ParentFailurePolicy;
  parent_outcome: Outcome;
}

export interface GraphPlan {
  disposition: Disposition[];
  /** Per item, its live and its failed parents (deduplicated). */
  counts: { pending: number; failed: number }[];
  edges: EdgeRow[];
  /** Items of this request that later items name as parents (flagged as having dependents). */
  referenced: Set<number>;
}

export function planGraph(
  queue: string,
  items: EnqueueItem[],
  ids: string[],
  /** Whether item i is new (not answered by an existing job through its key). */
  newItem: (i: number) => boolean,
  /** A reference as it stands: an item answered by an existing job stands for that job. */
  parentRef: (ref: ParentRef) => ParentRef,
  /** The parents named by id, held (parents.ts). */
  parents: Map<string, Parent>,
): GraphPlan {
  const disposition: Disposition[] = [];
  const edges: EdgeRow[] = [];
  const counts: { pending: number; failed: number }[] = [];
  const referenced = new Set<number>();
  items.forEach((item, i) => {
    if (!newItem(i)) {
      disposition.push('answered');
      counts.push({ pending: 0, failed: 0 });
      return;
    }
    const policy: ParentFailurePolicy = item.onParentFailure ?? 'cancel';
    const seen = new Set<string>();
    let pending = 0;
    let failed = 0;
    for (const ref of (item.dependsOn ?? []).map(parentRef)) {
      let parent: Parent;
      let parentId: string;
      if ('id' in ref) {
        parentId = ref.id;
        parent = parents.get(ref.id)!;
      } else {
        parentId = ids[ref.item]!;
        referenced.add(ref.item);
        parent = { queue, outcome: disposition[ref.item] === 'cancelled' ? 'cancelled' : null };
      }
      if (seen.has(parentId)) continue;
      seen.add(parentId);
      if (parent.outcome === null) pending++;
      else if (parent.outcome !== 'completed') failed++;
      edges.push({
        child: ids[i]!,
        parent: parentId,
        child_queue: queue,
        parent_queue: parent.queue,
        on_parent_failure: policy,
        parent_outcome: parent.outcome,
      });
    }
    counts.push({ pending, failed });
    disposition.push(failed > 0 && policy === 'cancel' ? 'cancelled' : pending > 0 ? 'waiting' : 'run');
  });

  return { disposition, counts, edges, referenced };
}
