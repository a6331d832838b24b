import type { ClaimedRow } from '../jobs/claim.js';
import type { EnqueuedRow, JobErrorEntry, JobRow } from '../jobs/job-row.js';
import { effectiveSettings, type QueueDefaults } from '../queues/queue-settings.js';
import type { QueueRow, QueueStatsRow } from '../queues/queue-store.js';

/**
 * The API's views: every response shape built from rows, in one place, matching the response
 * schemas in schemas/. Times are ISO 8601 UTC with milliseconds; a lease token appears only in a
 * claim's answer, never in a job read.
 */

/** The API's view of a just-enqueued job (no payload echoed back). */
export function toEnqueuedJob(row: EnqueuedRow) {
  return {
    id: row.id,
    queue: row.queue,
    state: row.state,
    priority: row.priority,
    run_at: row.run_at.toISOString(),
    attempts: row.attempts,
    max_attempts: row.max_attempts,
    idempotency_key: row.idempotency_key,
    created_at: row.created_at.toISOString(),
  };
}

/** The API's view of a job. The lease token never appears here. */
export function toJob(row: JobRow) {
  return {
    ...toEnqueuedJob(row),
    payload: row.payload,
    claimed_at: row.claimed_at?.toISOString() ?? null,
    lease_expires_at: row.state === 'claimed' ? (row.lease_expires_at?.toISOString() ?? null) : null,
    worker_id: row.worker_id,
    finished_at: row.finished_at?.toISOString() ?? null,
    result: row.result ?? null,
    last_error: row.last_error && withIsoTime(row.last_error),
    errors: (row.errors ?? []).map(withIsoTime),
    dead_reason: row.dead_reason,
    meta: row.meta ?? null,
  };
}

/** Entries written before every SQL time was ISO (see db/sql-time.ts) are shown the same way. */
const withIsoTime = (entry: JobErrorEntry): JobErrorEntry => ({
  ...entry,
  at: new Date(entry.at).toISOString(),
});

/** A claimed job as the claim answers it: with its lease token. */
export function toClaimedJob(r: ClaimedRow) {
  return {
    id: r.id,
    queue: r.queue,
    payload: r.payload,
    priority: r.priority,
    attempt: r.attempts,
    max_attempts: r.max_attempts,
    lease_token: r.lease_token,
    lease_expires_at: r.lease_expires_at.toISOString(),
    run_at: r.run_at.toISOString(),
    created_at: r.created_at.toISOString(),
  };
}

const OWN_SETTINGS: [keyof QueueRow, string][] = [
  ['lease_ms', 'lease_ms'],
  ['max_attempts', 'max_attempts'],
  ['backoff_base_ms', 'backoff.base_ms'],
  ['backoff_max_ms', 'backoff.max_ms'],
  ['backoff_jitter', 'backoff.jitter'],
  ['completed_retention_ms', 'retention.completed_ms'],
  ['dead_retention_ms', 'retention.dead_ms'],
];

const iso = (d: Date | null | undefined) => (d ? d.toISOString() : null);

/** The API's view of a queue: effective settings, which of them are inherited, and its stats. */
export function toQueue(row: QueueRow, stats: QueueStatsRow | undefined, defaults: QueueDefaults) {
  const eff = effectiveSettings(row, defaults);
  const liveAt = stats?.live_refreshed_at ?? null;
  return {
    name: row.name,
    auto_created: row.auto_created,
    paused: row.paused,
    lease_ms: eff.leaseMs,
    max_attempts: eff.maxAttempts,
    backoff: { base_ms: eff.backoff.baseMs, max_ms: eff.backoff.maxMs, jitter: eff.backoff.jitter },
    retention: { completed_ms: eff.completedRetentionMs, dead_ms: eff.deadRetentionMs },
    inherited: OWN_SETTINGS.filter(([column]) => row[column] === null).map(([, field]) => field),
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
    stats: {
      scheduled: Number(stats?.scheduled ?? 0),
      ready: Number(stats?.ready ?? 0),
      claimed: Number(stats?.claimed ?? 0),
      completed: Number(stats?.completed ?? 0),
      dead: Number(stats?.dead ?? 0),
      cancelled: Number(stats?.cancelled ?? 0),
      oldest_ready_age_ms:
        stats?.oldest_ready_at && liveAt
          ? Math.max(0, liveAt.getTime() - stats.oldest_ready_at.getTime())
          : null,
      completed_last_minute: Number(stats?.completed_last_minute ?? 0),
      live_refreshed_at: iso(liveAt),
      finished_refreshed_at: iso(stats?.finished_refreshed_at),
    },
  };
}
