import type { ClaimedRow } from '../jobs/claim/types.js';
import type { RelatedJob } from '../jobs/graph.js';
import type { EnqueuedRow, JobErrorEntry, JobRow } from '../jobs/job-row.js';
import type { LeaseHolderRow } from '../jobs/lease-holders.js';
import { PAYLOAD_PREVIEW_CHARS } from '../jobs/limits.js';
import type { MessageMove } from '../jobs/message-moves.js';
import { traceOf } from '../jobs/trace-context.js';
import type { WorkerRow } from '../jobs/workers.js';
import { parseDatabaseJson } from '../json/exact.js';
import type { GroupRow } from '../queues/group-store.js';
import type { OverviewRows } from '../queues/overview.js';
import type { PushEndpointRow } from '../queues/push-store.js';
import type { QueueSampleRow } from '../queues/queue-history.js';
import { effectiveSettings, type QueueDefaults } from '../queues/queue-settings.js';
import type { ListedQueueRow, QueueRow, QueueStatsRow } from '../queues/queue-store.js';
import type { ScheduleRow } from '../schedules/store.js';
import { isoTime } from './iso-time.js';

/**
 * The API's views: every response shape built from rows, in one place, matching the response
 * schemas in schemas/. Times are ISO 8601 UTC with milliseconds; a lease token appears only in a
 * claim's answer, never in a job read.
 */

const iso = (d: Date | null | undefined) => (d ? isoTime(d) : null);

/** A job's group as the API shows it: null for none (stored as ''). */
const groupOf = (key: string) => (key === '' ? null : key);

/** The API's view of a just-enqueued job (no payload echoed back). */
export function toEnqueuedJob(row: EnqueuedRow) {
  return {
    id: row.id,
    queue: row.queue,
    group: groupOf(row.group_key),
    state: row.state,
    priority: row.priority,
    run_at: isoTime(row.run_at),
    attempts: row.attempts,
    max_attempts: row.max_attempts,
    idempotency_key: row.idempotency_key,
    created_at: isoTime(row.created_at),
    timeout_ms: row.timeout_ms,
    expires_at: iso(row.expires_at),
    unique_key: row.unique_key,
  };
}

/**
 * An enqueue answer's `depends_on_applied` (schemas/jobs.ts): for an item that gave depends_on, whether
 * its edges were written, which they are exactly when the item created its job; an existing job that
 * answered the item's key is left as it is. Absent (undefined) for an item without depends_on.
 */
export const dependsOnApplied = (item: { dependsOn?: unknown[] | undefined }, created: boolean) =>
  item.dependsOn === undefined ? {} : { depends_on_applied: created };

/**
 * A batch enqueue's minimal answer (`Prefer: return=minimal`, schemas BatchEnqueueIds) as JSON text:
 * ids are digits and `created` and `depends_on_applied` booleans, so nothing needs escaping, and no
 * serialiser runs.
 */
export function batchEnqueuedIdsJson(
  results: { job: { id: string }; created: boolean; depends_on_applied?: boolean }[],
): string {
  let json = '{"jobs":[';
  for (let i = 0; i < results.length; i++) {
    const { job, created, depends_on_applied: applied } = results[i]!;
    const deps = applied === undefined ? '' : `,"depends_on_applied":${applied}`;
    json += `${i === 0 ? '' : ','}{"id":"${job.id}","created":${created}${deps}}`;
  }
  return `${json}]}`;
}

/**
 * The start of a payload's JSON text, for a list that leaves payloads out: enough to tell jobs apart
 * at a glance (the dashboard's job browser) without sending a page of whole payloads. A cut one ends
 * in "…", never inside a surrogate pair.
 */
export function payloadPreview(payload: unknown): string {
  const text = JSON.stringify(payload) ?? 'null';
  if (text.length <= PAYLOAD_PREVIEW_CHARS) return text;
  let end = PAYLOAD_PREVIEW_CHARS - 1;
  const last = text.charCodeAt(end - 1);
  if (last >= 0xd800 && last <= 0xdbff) end--;
  return `${text.slice(0, end)}…`;
}

/** A job as a list shows it: whole with `includePayload`, else without payload and meta but with a preview. */
export function toListedJob(row: JobRow, includePayload: boolean | undefined) {
  const job = toJob(row);
  return includePayload
    ? job
    : { ...job, payload: null, meta: null, payload_preview: payloadPreview(row.payload) };
}

/** The API's view of a job. The lease token never appears here. */
export function toJob(row: JobRow) {
  return {
    ...toEnqueuedJob(row),
    payload: row.payload,
    claimed_at: iso(row.claimed_at),
    lease_expires_at: row.state === 'claimed' ? iso(row.lease_expires_at) : null,
    deadline_at: row.state === 'claimed' ? iso(row.deadline_at) : null,
    worker_id: row.worker_id,
    finished_at: iso(row.finished_at),
    result: row.result ?? null,
    last_error: row.last_error && withIsoTime(row.last_error),
    errors: (row.errors ?? []).map(withIsoTime),
    dead_reason: row.dead_reason,
    progress: row.progress ?? null,
    ...traceView(row.meta),
    meta: row.meta ?? null,
  };
}

/** A parent or child of a job (jobs/graph.ts) as GET /v1/jobs/{id}/parents and /children show it. */
export function toRelatedJob(job: RelatedJob) {
  return {
    id: job.id,
    queue: job.queue,
    state: job.state,
    parent_outcome: job.parent_outcome,
    result: job.result ?? null,
    finished_at: iso(job.finished_at),
  };
}

/** A job's trace context as its views show it. */
export function traceView(meta: unknown) {
  const trace = traceOf(meta);
  return { traceparent: trace?.traceparent ?? null, tracestate: trace?.tracestate ?? null };
}

/** Entries written before every SQL time was ISO (see db/sql-time.ts) are shown the same way. */
const withIsoTime = (entry: JobErrorEntry): JobErrorEntry => ({
  ...entry,
  at: isoTime(new Date(entry.at)),
});

/**
 * A claimed job as the claim answers it: with its lease token. The claim route itself writes this
 * shape as text without building the object (http/claim-response.ts); this is for answers serialised
 * from their schema.
 */
export function toClaimedJob(r: ClaimedRow) {
  return {
    id: r.id,
    queue: r.queue,
    group: groupOf(r.group_key),
    payload: parseDatabaseJson(r.payload_json),
    priority: r.priority,
    attempt: r.attempts,
    max_attempts: r.max_attempts,
    lease_token: r.lease_token,
    lease_expires_at: isoTime(r.lease_expires_at),
    deadline_at: iso(r.deadline_at),
    run_at: isoTime(r.run_at),
    created_at: isoTime(r.created_at),
    ...traceView(r.meta),
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

/** The API's view of a queue: effective settings, which of them are inherited, and its stats. */
export function toQueue(row: ListedQueueRow, stats: QueueStatsRow | undefined, defaults: QueueDefaults) {
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
    ...queueLimits(row),
    timeout_ms: row.timeout_ms,
    push: row.push,
    inherited: OWN_SETTINGS.filter(([column]) => row[column] === null).map(([, field]) => field),
    created_at: isoTime(row.created_at),
    updated_at: isoTime(row.updated_at),
    stats: {
      waiting: Number(stats?.waiting ?? 0),
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
      failing: Number(stats?.failing ?? 0),
      completed_last_minute: Number(stats?.completed_last_minute ?? 0),
      live_refreshed_at: iso(liveAt),
      finished_refreshed_at: iso(stats?.finished_refreshed_at),
    },
  };
}

const count = (value: string | null) => (value === null ? null : Number(value));

/** One per-minute sample of a queue's history. */
export function toQueueSample(row: QueueSampleRow) {
  return {
    minute: isoTime(row.minute),
    at: isoTime(row.at),
    since: isoTime(row.since),
    scheduled: Number(row.scheduled),
    ready: Number(row.ready),
    claimed: Number(row.claimed),
    oldest_ready_age_ms: count(row.oldest_ready_age_ms),
    enqueued: count(row.enqueued),
    completed: Number(row.completed),
    dead: Number(row.dead),
    cancelled: Number(row.cancelled),
    attempts_failed: count(row.attempts_failed),
  };
}

/** The API's view of a cron schedule. */
export function toSchedule(row: ScheduleRow) {
  return {
    name: row.name,
    queue: row.queue,
    cron: row.cron,
    timezone: row.timezone,
    payload: row.payload,
    priority: row.priority,
    max_attempts: row.max_attempts,
    group: row.group_key,
    timeout_ms: row.timeout_ms,
    expires_in_ms: row.expires_in_ms,
    unique_key: row.unique_key,
    on_conflict: row.on_conflict,
    overlap: row.overlap,
    catch_up: row.catch_up,
    paused: row.paused,
    next_run_at: row.paused ? null : iso(row.next_run_at),
    last_run_at: iso(row.last_run_at),
    last_job_id: row.last_job_id,
    last_error: row.last_error && {
      at: isoTime(new Date(row.last_error.at)),
      message: row.last_error.message,
    },
    source: row.from_file ? ('file' as const) : ('api' as const),
    drifted: row.drifted,
    created_at: isoTime(row.created_at),
    updated_at: isoTime(row.updated_at),
  };
}

/** The API's view of a rate limit stored as two columns. */
const rateLimitOf = (limit: number | null, periodMs: number | null) =>
  limit === null || periodMs === null ? null : { limit, period_ms: periodMs };

/** The flow-control part of a queue's view. */
export function queueLimits(row: QueueRow) {
  return {
    concurrency_limit: row.concurrency_limit,
    rate_limit: rateLimitOf(row.rate_limit, row.rate_period_ms),
    group_concurrency_limit: row.group_concurrency_limit,
    group_rate_limit: rateLimitOf(row.group_rate_limit, row.group_rate_period_ms),
    grouped: row.grouped,
  };
}

/** The API's view of a group: counts, and the limits in effect (its overrides, else the queue's). */
export function toGroup(queue: QueueRow, row: GroupRow, countedAt: Date | null) {
  const o = row.override;
  const overridden: string[] = o
    ? (['concurrency_limit', 'rate_limit', 'weight'] as const).filter((k) => o[k] !== null)
    : [];
  if (o?.paused) overridden.push('paused');
  return {
    queue: queue.name,
    group: groupOf(row.group_key),
    ready: Number(row.ready),
    claimed: Number(row.claimed),
    scheduled: Number(row.scheduled),
    refreshed_at: iso(countedAt),
    concurrency_limit: o?.concurrency_limit ?? queue.group_concurrency_limit,
    rate_limit:
      o?.rate_limit != null
        ? rateLimitOf(o.rate_limit, o.rate_period_ms)
        : rateLimitOf(queue.group_rate_limit, queue.group_rate_period_ms),
    weight: o?.weight ?? 1,
    paused: o?.paused ?? false,
    overridden,
  };
}

/** One worker's leases in one queue (GET /v1/workers). */
export function toLeaseHolder(row: LeaseHolderRow) {
  return {
    worker_id: row.worker_id,
    queue: row.queue,
    jobs: row.jobs,
    oldest_claimed_at: isoTime(row.oldest_claimed_at),
    last_renewed_at: isoTime(row.last_renewed_at),
    next_expiry_at: isoTime(row.next_expiry_at),
  };
}

/** The system at a glance (GET /v1/overview). */
export function toOverview(rows: OverviewRows) {
  return {
    as_of: isoTime(rows.now),
    totals: {
      ...rows.totals,
      counted_at: iso(rows.totals.counted_at),
      finished_counted_at: iso(rows.totals.finished_counted_at),
    },
    minutes: rows.minutes.map((m) => ({ ...m, minute: isoTime(m.minute) })),
    attention: rows.attention.map((a) => ({
      ...a,
      oldest_ready_age_ms:
        a.oldest_ready_age_ms === null ? null : Math.max(0, Math.round(a.oldest_ready_age_ms)),
    })),
  };
}

/** The API's view of a worker that announced itself. */
export function toAnnouncedWorker(row: WorkerRow) {
  return {
    id: row.id,
    host: row.host,
    pid: row.pid,
    concurrency: row.concurrency,
    version: row.version,
    queues: row.queues,
    started_at: isoTime(row.started_at),
    last_seen_at: isoTime(row.last_seen_at),
    busy: row.jobs > 0,
    jobs: row.jobs,
    job_ids: row.job_ids,
  };
}

/** The API's view of a message move. */
export function toMove(row: MessageMove) {
  return {
    id: row.id,
    queue: row.source_queue,
    destination: row.destination_queue,
    max_per_second: row.max_per_second,
    status: row.status,
    moved: Number(row.moved),
    to_move: Number(row.to_move),
    failure_reason: row.failure_reason,
    started_at: isoTime(row.started_at),
    finished_at: iso(row.finished_at),
  };
}

/** A push queue's endpoint; `secret` only when the answer made it. The previous secret never shows. */
export function toPushEndpoint(row: PushEndpointRow, secret?: string) {
  const overlapping = row.previous_until !== null && row.previous_until.getTime() > Date.now();
  return {
    queue: row.queue,
    url: row.url,
    timeout_ms: row.timeout_ms,
    concurrency: row.concurrency,
    ...(secret === undefined ? {} : { secret }),
    secret_created_at: isoTime(row.secret_created_at),
    previous_secret_until: overlapping ? isoTime(row.previous_until!) : null,
    created_at: isoTime(row.created_at),
    updated_at: isoTime(row.updated_at),
  };
}
