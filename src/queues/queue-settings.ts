import type { Config } from '../config.js';
import type { QueuesTable } from '../db/schema.js';
import { DomainError, invalidField } from '../errors.js';

/**
 * A queue's effective settings: its own value where it set one, else the server default.
 * This is the only place the two are combined, so a default changes for every queue at once.
 */
export interface QueueSettings {
  leaseMs: number;
  maxAttempts: number;
  backoff: BackoffPolicy;
  completedRetentionMs: number;
  deadRetentionMs: number;
  paused: boolean;
}

export interface BackoffPolicy {
  baseMs: number;
  maxMs: number;
  jitter: boolean;
}

export type QueueDefaults = Pick<
  Config,
  | 'defaultLeaseMs'
  | 'defaultMaxAttempts'
  | 'backoffBaseMs'
  | 'backoffMaxMs'
  | 'backoffJitter'
  | 'completedRetentionMs'
  | 'deadRetentionMs'
>;

type QueueRow = {
  [K in keyof QueuesTable]?: unknown;
};

const num = (v: unknown) => (v === null || v === undefined ? undefined : Number(v));

export function effectiveSettings(row: QueueRow | undefined, d: QueueDefaults): QueueSettings {
  return {
    leaseMs: num(row?.lease_ms) ?? d.defaultLeaseMs,
    maxAttempts: num(row?.max_attempts) ?? d.defaultMaxAttempts,
    backoff: {
      baseMs: num(row?.backoff_base_ms) ?? d.backoffBaseMs,
      maxMs: num(row?.backoff_max_ms) ?? d.backoffMaxMs,
      jitter: (row?.backoff_jitter as boolean | null | undefined) ?? d.backoffJitter,
    },
    completedRetentionMs: num(row?.completed_retention_ms) ?? d.completedRetentionMs,
    deadRetentionMs: num(row?.dead_retention_ms) ?? d.deadRetentionMs,
    paused: Boolean(row?.paused),
  };
}

/**
 * The one rule between two settings: a backoff cap below its base would make the cap meaningless.
 * Checked for each queue (checkSettings), and written out again for the server defaults in
 * config.ts, which imports nothing of the domain; answers the offending base, or undefined when the
 * pair is fine.
 */
export function backoffProblem(baseMs: number, maxMs: number): number | undefined {
  return maxMs < baseMs ? baseMs : undefined;
}

/**
 * A queue's settings after a change, counting values it keeps or inherits: a 400 naming the field
 * when they break a rule.
 */
export function checkSettings(merged: QueueSettings): void {
  const base = backoffProblem(merged.backoff.baseMs, merged.backoff.maxMs);
  if (base === undefined) return;
  const message = `must be at least backoff.base_ms (${base})`;
  throw new DomainError('validation_failed', `backoff.max_ms (${merged.backoff.maxMs}) ${message}`, [
    { field: 'backoff.max_ms', message },
  ]);
}

/**
 * Whether a queue's meta marks it an SQS FIFO queue (created through the SQS endpoint with
 * FifoQueue=true; docs/sqs.md). Such a queue serves each message group one job at a time, in order:
 * its group_concurrency_limit is 1, set when it is created.
 */
export function isFifoQueue(meta: unknown): boolean {
  const sqs = (meta as { sqs?: { attributes?: Record<string, unknown> } } | null | undefined)?.sqs;
  return sqs?.attributes?.FifoQueue === 'true';
}

/**
 * What keeps an SQS FIFO queue FIFO: one job per group in flight. A change through Baton's own API
 * that would allow more is refused with a 400 naming the field, rather than quietly breaking the
 * order its SQS consumers rely on: the queue's group_concurrency_limit other than 1 or removed
 * (null), or a group's own concurrency_limit above 1 (null is fine there: it falls back to the
 * queue's 1). To lift it, use a standard queue.
 */
export function checkFifoGroupLimit(
  meta: unknown,
  change: { field: string; limit: number | null | undefined; nullKeepsOne: boolean },
): void {
  const { field, limit, nullKeepsOne } = change;
  if (!isFifoQueue(meta) || limit === undefined || limit === 1 || (limit === null && nullKeepsOne)) return;
  throw invalidField(
    field,
    'must stay 1 on an SQS FIFO queue (one message per group in flight is what keeps its groups in order)',
  );
}
