/**
 * One job as an enqueue takes it, whichever path inserts it (enqueue.ts, and unique.ts for the jobs
 * of a unique key): on its own so that those two, which call each other, share it without importing
 * each other for it.
 */
export interface EnqueueItem {
  /** The payload as JSON text (already size-checked). */
  payloadJson: string;
  priority: number;
  delayMs?: number;
  runAt?: string;
  maxAttempts?: number;
  idempotencyKey?: string;
  /** The job's group (flow control); undefined for none. */
  group?: string;
  /** Metadata kept with the job (baton.jobs.meta), as plain JSON; e.g. SQS message attributes. */
  meta?: unknown;
  /** Budget of one attempt, from claim (undefined: the queue's). */
  timeoutMs?: number;
  /** No attempt starts after this time (UTC), or this long from now: at most one of the two. */
  expiresAt?: string;
  expiresInMs?: number;
  /** At most one waiting job per queue and key (unique.ts). */
  uniqueKey?: string;
  /** What an enqueue whose unique key is held by a waiting job does: `keep` (default) or `replace`. */
  onConflict?: OnConflict;
  /** The jobs this one waits for (jobs/dependencies.ts): job ids, or earlier items of the same batch. */
  dependsOn?: ParentRef[];
  /** What a parent that goes dead, is cancelled or expires does to this job: `cancel` (default) or `run`. */
  onParentFailure?: ParentFailurePolicy;
}

/** A parent: an existing job by id, or the item at this (earlier) position of the same request. */
export type ParentRef = { id: string } | { item: number };
export type ParentFailurePolicy = 'cancel' | 'run';

export type OnConflict = 'keep' | 'replace';
