import { effectiveSettings, type QueueDefaults } from './queue-settings.js';
import type { QueueRow, QueueStatsRow } from './queue-store.js';

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
