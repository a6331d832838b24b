import type { Transaction } from 'kysely';
import type { Db } from '../../db/database.js';
import type { Database } from '../../db/schema.js';
import { invalidField } from '../../errors.js';
import type { EnqueuedRow } from '../job-row.js';
import { type EnqueueOptions, type EnqueueResult, holdOrCreateQueue } from './enqueue.js';
import { planGraph } from './graph-plan.js';
import { writeGraph } from './graph-rows.js';
import { claimIdempotencyKeys, KeysOfGoneJobs, pointKeysAt, type StaleKey } from './idempotency-keys.js';
import type { EnqueueItem, ParentRef } from './item.js';
import { holdParents, type ParentScope } from './parents.js';
import { resolveUniqueKeys } from './unique-keys.js';

/**
 * Enqueue jobs that wait for others (`depends_on`), in one transaction (docs/adr/0002-job-dependencies.md).
 * Only requests naming parents come here: a plain enqueue keeps its one grouped statement (enqueue.ts).
 * The steps, each in its own file:
 * 1. Hold the queue row (FOR KEY SHARE, as every enqueue does), draw an id per item in request order
 *    and claim the idempotency keys (idempotency-keys.ts, as every keyed enqueue does); then the
 *    unique keys of the items still new (unique-keys.ts).
 * 2. Hold every parent named by id (parents.ts): its live row flagged and locked to our commit, so a
 *    parent's finish after it releases the edges written here; one that finished before is read from
 *    history. A parent found nowhere, or outside the caller's queues, is a 400 naming the field.
 * 3. Decide each item: run now, wait, or cancelled at once (graph-plan.ts, no database).
 * 4. Write the jobs and one edge per (child, parent) (graph-rows.ts).
 * From then on the parents' finishes move the children (the trigger on job_history, migration 0016;
 * the releaser, docs/adr/0004-bounded-release.md).
 */

/** How many times the transaction runs again after a deadlock or a row moved by the ring. */
const ATTEMPTS = 5;

export async function enqueueWithParents(
  db: Db,
  queue: string,
  given: EnqueueItem[],
  opts: EnqueueOptions,
  scope: ParentScope,
  field: (index: number) => string,
): Promise<EnqueueResult[]> {
  // Keys found naming a job that is gone: the next attempt takes them over (idempotency-keys.ts).
  let gone: StaleKey[] = [];
  for (let attempt = 1; ; attempt++) {
    try {
      // A copy per attempt: a unique key's `replace` rewrites an item's data (enqueueInOrder).
      const items = [...given];
      return await db
        .transaction()
        .execute((trx) => enqueueInOrder(trx, queue, items, opts, { scope, field, gone }));
    } catch (err) {
      // Two requests holding the same parents in another order, or a parent the ring carried to
      // another slot while we held it: the transaction did nothing, so it runs again.
      const code = (err as { code?: string }).code;
      if (attempt < ATTEMPTS && (code === '40P01' || code === '40001')) continue;
      if (attempt < ATTEMPTS && err instanceof KeysOfGoneJobs) {
        gone = err.keys;
        continue;
      }
      throw err;
    }
  }
}

async function enqueueInOrder(
  trx: Transaction<Database>,
  queue: string,
  items: EnqueueItem[],
  opts: EnqueueOptions,
  request: { scope: ParentScope; field: (index: number) => string; gone: StaleKey[] },
): Promise<EnqueueResult[]> {
  const { scope, field } = request;
  await holdOrCreateQueue(trx, queue, opts);
  const keys = await claimIdempotencyKeys(trx, queue, items, opts.idempotencyRetentionMs, request.gone);
  const { ids, answered, sameAs } = keys;
  // Unique keys of the items still new, under the key rows' locks (unique-keys.ts): a key a waiting job
  // holds answers that job (`replace` gives it this item's payload, priority and run_at); a new job
  // takes the key, a job waiting for parents included (it holds it as a scheduled job would).
  const unique = items.flatMap((item, i) =>
    item.uniqueKey !== undefined && !answered.has(i) && !sameAs.has(i) ? [i] : [],
  );
  if (unique.length > 0) {
    const decisions = await resolveUniqueKeys(
      trx,
      queue,
      unique.map((i) => items[i]!),
      unique.map((i) => ids[i]!),
    );
    decisions.forEach((d, k) => {
      const i = unique[k]!;
      if (d === undefined) return;
      if ('job' in d) answered.set(i, d.job);
      else if ('sameAs' in d) sameAs.set(i, unique[d.sameAs]!);
      else items[i] = d.insert;
    });
  }
  // An item answered by the job of its idempotency key stands, as a parent, for that job (a job by id);
  // one repeating a key of an earlier item, for that item.
  const parentRef = (ref: ParentRef): ParentRef => {
    if ('id' in ref) return ref;
    const item = sameAs.get(ref.item) ?? ref.item;
    const job = answered.get(item);
    return job ? { id: String(job.id) } : { item };
  };
  const newItem = (i: number) => !answered.has(i) && !sameAs.has(i);

  const named = [
    ...new Set(
      items.flatMap((item, i) =>
        newItem(i) ? (item.dependsOn ?? []).map(parentRef).flatMap((p) => ('id' in p ? [p.id] : [])) : [],
      ),
    ),
  ];
  const parents = await holdParents(trx, named, scope);
  items.forEach((item, i) => {
    if (!newItem(i)) return;
    for (const [k, p] of (item.dependsOn ?? []).map(parentRef).entries()) {
      if ('id' in p && !parents.has(p.id)) {
        throw invalidField(`${field(i)}depends_on[${k}]`, `names job ${p.id}, which does not exist`);
      }
    }
  });

  const plan = planGraph(queue, items, ids, newItem, parentRef, parents);
  const results = await writeGraph(trx, queue, items, ids, plan, opts.defaultMaxAttempts);

  // The job each item ended as: a new one, the job that answered it (a unique key's included), or
  // that of the earlier item whose key it repeats.
  const jobOf = (i: number): EnqueuedRow => {
    const first = sameAs.get(i) ?? i;
    return results.get(first) ?? answered.get(first)!;
  };
  await pointKeysAt(trx, queue, items, keys, jobOf);
  return items.map((_, i) => ({ job: jobOf(i), created: results.has(i) }));
}
