import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { KeyedHistogram } from './keyed-histogram.js';

/**
 * Every Prometheus metric Baton exports, declared once (docs/metrics.md describes each with an
 * alert). One instance per app, not prom-client's global registry, so several apps in one process
 * (tests, benchmarks) keep separate counts.
 *
 * Label sets stay bounded: queue names (capped by BATON_METRICS_MAX_QUEUES, the rest counted as
 * queue="_other"), fixed outcomes, route templates and status classes; never ids or tokens.
 */
export class Metrics {
  readonly registry = new Registry();
  private readonly queueLabels = new Set<string>();

  constructor(private readonly maxQueues = 200) {
    this.leader.set(0);
    for (const outcome of ['pruned', 'noop', 'blocked', 'error']) this.prune.inc({ outcome }, 0);
    for (const outcome of ['created', 'dropped', 'blocked']) this.historyPartitions.inc({ outcome }, 0);
    for (const outcome of ['ready', 'dead']) this.leasesRearmed.inc({ outcome }, 0);
    this.rearmFailures.inc(0);
    this.jobsPromoted.inc(0);
    for (const outcome of ['truncated', 'blocked']) this.ringTruncations.inc({ outcome }, 0);
    this.ringCarried.inc(0);
    this.claimFloorWalks.inc(0);
    for (const outcome of ['ready', 'cancelled', 'restored']) this.jobsReleased.inc({ outcome }, 0);
  }

  /** The label for a queue: its name, or "_other" once the cap of distinct names is reached. */
  queue(name: string): string {
    if (this.queueLabels.has(name)) return name;
    if (this.queueLabels.size >= this.maxQueues) return '_other';
    this.queueLabels.add(name);
    return name;
  }

  // --- HTTP ---------------------------------------------------------------------------------
  readonly httpDuration = new KeyedHistogram({
    name: 'baton_http_request_duration_seconds',
    help: 'HTTP request duration by method, route template and status class (2xx, 4xx, 5xx).',
    labelNames: ['method', 'route', 'status_class'],
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25],
    registers: [this.registry],
  });

  readonly requestsShed = new Counter({
    name: 'baton_requests_shed_total',
    help: 'Requests answered 503 at once because the server was overloaded, by reason (event_loop, pool).',
    labelNames: ['reason'],
    registers: [this.registry],
  });
  readonly dbPool = new Gauge({
    name: 'baton_db_pool_connections',
    help: 'Database pool connections by state (total, idle) and queries waiting for one (waiting).',
    labelNames: ['state'],
    registers: [this.registry],
  });

  // --- the job lifecycle, by queue ------------------------------------------------------------
  readonly jobsEnqueued = this.queueCounter(
    'baton_jobs_enqueued_total',
    'Jobs created by enqueue (not idempotent repeats).',
  );
  readonly jobsClaimed = this.queueCounter('baton_jobs_claimed_total', 'Jobs handed to workers by claim.');
  readonly jobsAcked = this.queueCounter('baton_jobs_acked_total', 'Jobs completed by ack.');
  readonly jobsCancelled = this.queueCounter(
    'baton_jobs_cancelled_total',
    'Jobs cancelled (cancel, purge, forced delete).',
  );
  readonly leasesRenewed = this.queueCounter('baton_leases_renewed_total', 'Successful lease renewals.');
  readonly jobsNacked = new Counter({
    name: 'baton_jobs_nacked_total',
    help:
      'Nacks by outcome: retry (a failed attempt, back to wait), dead, or given_back (a job handed back ' +
      'uncounted by a stopping worker, ready again).',
    labelNames: ['queue', 'outcome'],
    registers: [this.registry],
  });
  readonly leasesLost = new Counter({
    name: 'baton_leases_lost_total',
    help: 'Renew, ack or nack refused with 409 lease_lost (a stale worker), by operation.',
    labelNames: ['queue', 'operation'],
    registers: [this.registry],
  });
  readonly claimToAck = new KeyedHistogram({
    name: 'baton_claim_to_ack_seconds',
    help: 'Time from claim to ack: how long workers take to finish a job.',
    labelNames: ['queue'],
    buckets: [0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600],
    registers: [this.registry],
  });
  readonly queueLag = new KeyedHistogram({
    name: 'baton_queue_lag_seconds',
    help: 'Time from a job becoming due (run_at) to its claim: how far behind the workers are.',
    labelNames: ['queue'],
    buckets: [0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600],
    registers: [this.registry],
  });

  // --- state of the queues (set at scrape time from baton.queue_stats, kept by the leader) -----
  readonly jobs = new Gauge({
    name: 'baton_jobs',
    help: 'Jobs by queue and state (live states, and finished ones within retention), as last counted by the leader.',
    labelNames: ['queue', 'state'],
    registers: [this.registry],
  });
  readonly oldestReadyJob = new Gauge({
    name: 'baton_oldest_ready_job_seconds',
    help: 'Age of the oldest ready job by queue, as last counted by the leader (0 when none is ready).',
    labelNames: ['queue'],
    registers: [this.registry],
  });
  readonly statsAge = new Gauge({
    name: 'baton_queue_stats_age_seconds',
    help: 'Seconds since the leader last counted queue statistics (grows when the leader is stuck).',
    registers: [this.registry],
  });

  // --- the maintenance leader ------------------------------------------------------------------
  readonly leader = new Gauge({
    name: 'baton_leader',
    help: '1 while this replica is the maintenance leader, else 0.',
    registers: [this.registry],
  });
  readonly leaderGap = new Histogram({
    name: 'baton_leader_gap_seconds',
    help:
      'Moments with no maintenance leader, measured by the replica that ended each: kind lapse (the ' +
      "leader's renewal came after its lease ran out by its own clock) or takeover (a new leader took " +
      'a lease that had expired in the database).',
    labelNames: ['kind'],
    buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [this.registry],
  });
  readonly maintenanceRuns = new Counter({
    name: 'baton_maintenance_runs_total',
    help: 'Maintenance duty runs on this replica, by duty and outcome (ok or error).',
    labelNames: ['duty', 'outcome'],
    registers: [this.registry],
  });
  readonly maintenanceLastSuccess = new Gauge({
    name: 'baton_maintenance_last_success_timestamp_seconds',
    help: 'Unix time of the last successful run of each maintenance duty (alert when it stops moving).',
    labelNames: ['duty'],
    registers: [this.registry],
  });
  readonly leasesRearmed = new Counter({
    name: 'baton_leases_rearmed_total',
    help: 'Expired leases re-armed by the leader, by outcome: ready (retry) or dead (attempts exhausted).',
    labelNames: ['outcome'],
    registers: [this.registry],
  });
  readonly rearmFailures = new Counter({
    name: 'baton_rearm_failures_total',
    help: 'Re-arm runs that failed with an error (expired leases are not coming back while this rises).',
    registers: [this.registry],
  });
  readonly oldestExpiredLease = new Gauge({
    name: 'baton_oldest_expired_lease_seconds',
    help: 'Age of the oldest lease that has expired but not yet been re-armed (0 when none).',
    registers: [this.registry],
  });
  readonly jobsPromoted = new Counter({
    name: 'baton_jobs_promoted_total',
    help: 'Scheduled jobs made ready by the leader because their run_at arrived.',
    registers: [this.registry],
  });
  readonly releaseSteps = new Counter({
    name: 'baton_release_steps_total',
    help:
      'Steps of releasing children of finished parents on this replica (each one transaction of up to 1,000 children), ' +
      'by outcome: ok, or error (a step that rolled back and is tried again).',
    labelNames: ['outcome'],
    registers: [this.registry],
  });
  readonly releaseEvents = new Counter({
    name: 'baton_release_events_total',
    help: 'Parent events (a parent with children finished, or was redriven) applied by release steps on this replica.',
    registers: [this.registry],
  });
  readonly jobsReleased = new Counter({
    name: 'baton_jobs_released_total',
    help:
      'Children moved by release steps on this replica: ready (their last parent finished), cancelled ' +
      '(a parent failed under the policy cancel), restored (a redriven parent brought them back to waiting).',
    labelNames: ['outcome'],
    registers: [this.registry],
  });
  readonly claimsHeldBack = new Counter({
    name: 'baton_claims_held_back_total',
    help: 'Claims that got fewer jobs than they asked for because of a flow-control limit, by queue and reason: concurrency, rate, group_concurrency, group_rate, group_paused.',
    labelNames: ['queue', 'reason'],
    registers: [this.registry],
  });
  readonly pushDeliveries = new Counter({
    name: 'baton_push_deliveries_total',
    help:
      'Push deliveries by queue and outcome: acked (2xx), accepted (202: the endpoint keeps the lease), failed ' +
      '(another answer), dead (410 or Baton-Dead), throttled (429 or 503), timeout, unreachable (a connection that ' +
      'failed, or an address BATON_PUSH_ALLOW refuses), stopped (the replica stopped mid-delivery).',
    labelNames: ['queue', 'outcome'],
    registers: [this.registry],
  });
  readonly pushSeconds = new Histogram({
    name: 'baton_push_delivery_seconds',
    help: 'Time from sending a push to its answer (or its failure), by queue.',
    labelNames: ['queue'],
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300],
    registers: [this.registry],
  });
  readonly pushWindow = new Gauge({
    name: 'baton_push_concurrency',
    help: "Push deliveries this replica lets be in flight now, by queue: the queue's concurrency, narrowed after throttling and regrown after answers.",
    labelNames: ['queue'],
    registers: [this.registry],
  });
  readonly pushThrottled = new Counter({
    name: 'baton_push_backoffs_total',
    help: 'Times an endpoint made this replica back off (a 429 or 503, or a timeout), by queue: each halves its concurrency.',
    labelNames: ['queue'],
    registers: [this.registry],
  });
  readonly ringTruncations = new Counter({
    name: 'baton_ring_truncations_total',
    help: 'Slots of the live-job ring emptied by TRUNCATE, by outcome: truncated, or blocked (a lock timeout; rolled back, tried again next pass).',
    labelNames: ['outcome'],
    registers: [this.registry],
  });
  readonly ringCarried = new Counter({
    name: 'baton_ring_carried_total',
    help: 'Long-running claimed jobs carried from a sealed slot of the ring to the current one, so the sealed slot can be emptied.',
    registers: [this.registry],
  });
  readonly claimFloorWalks = new Counter({
    name: 'baton_claim_floor_walks_total',
    help: "The leader's walks of every queue's ready index to publish claim floors, made only while readers of baton.jobs keep the ring from being truncated (docs/adr/0013-claims-under-readers.md).",
    registers: [this.registry],
  });
  readonly ringSlotsInUse = new Gauge({
    name: 'baton_ring_slots_in_use',
    help: 'Slots of the live-job ring holding pages after the last pass. Near the ring size for long, while ready jobs wait in every slot (a backlog) or truncations are blocked.',
    registers: [this.registry],
  });
  readonly prune = new Counter({
    name: 'baton_prune_total',
    help: 'Prune attempts by outcome: pruned, noop, blocked (a lock timeout; rolled back, retried later) or error.',
    labelNames: ['outcome'],
    registers: [this.registry],
  });
  readonly historyPartitions = new Counter({
    name: 'baton_history_partitions_total',
    help: 'Day partitions of finished-job history, by outcome: created (ahead of their day), dropped (every row past retention: TRUNCATE, then DROP), or blocked (a lock timeout; rolled back, tried again).',
    labelNames: ['outcome'],
    registers: [this.registry],
  });
  readonly jobsPruned = new Counter({
    name: 'baton_jobs_pruned_total',
    help: 'Finished jobs removed after their retention.',
    registers: [this.registry],
  });
  readonly jobsExpired = new Counter({
    name: 'baton_jobs_expired_total',
    help: 'Jobs not claimed by their expires_at, moved to dead (reason expired) by the leader, by queue.',
    labelNames: ['queue'],
    registers: [this.registry],
  });
  readonly keysExpired = new Counter({
    name: 'baton_idempotency_keys_expired_total',
    help: 'Idempotency keys removed after their retention.',
    registers: [this.registry],
  });
  readonly vacuums = new Counter({
    name: 'baton_vacuum_total',
    help: 'Leader vacuum checks of the live jobs table, by outcome: vacuumed, noop (below the threshold) or skipped (autovacuum was at work on it).',
    labelNames: ['outcome'],
    registers: [this.registry],
  });
  readonly liveTableDeadRows = new Gauge({
    name: 'baton_live_table_dead_rows',
    help: 'Dead row versions in baton.jobs (PostgreSQL statistics, read by the leader each tick; after a vacuum, what it could not remove). Claims slow down as they pile up.',
    registers: [this.registry],
  });
  readonly oldestTransaction = new Gauge({
    name: 'baton_oldest_transaction_seconds',
    help: "Age of the oldest open transaction in Baton's database (read by the leader each tick). While it is open, vacuum cannot remove dead rows and claims slow down.",
    registers: [this.registry],
  });
  readonly scheduleOccurrences = new Counter({
    name: 'baton_schedule_occurrences_total',
    help: 'Cron schedule occurrences handled by the leader, by queue and outcome: enqueued, skipped (overlap), missed (catch_up none, or past the catch_up all bound), coalesced (into one job by catch_up latest), folded (into the waiting job holding the schedule unique_key), failed (the queue could not take the job) or duplicate (found already enqueued; should stay 0).',
    labelNames: ['queue', 'outcome'],
    registers: [this.registry],
  });
  readonly scheduleLateness = new Histogram({
    name: 'baton_schedule_lateness_seconds',
    help: "From a schedule occurrence's time to its job's enqueue (database clock).",
    labelNames: ['queue'],
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 3600],
    registers: [this.registry],
  });
  readonly queuesCollected = new Counter({
    name: 'baton_queues_collected_total',
    help: 'Idle auto-created queues removed by the leader.',
    registers: [this.registry],
  });

  // --- recording, for the routes ----------------------------------------------------------------
  enqueued(queue: string, count: number): void {
    if (count > 0) this.jobsEnqueued.inc({ queue: this.queue(queue) }, count);
  }

  claimed(queue: string, jobs: { run_at: Date; claimed_at: Date }[]): void {
    if (jobs.length === 0) return;
    const label = this.queue(queue);
    const labels = { queue: label };
    this.jobsClaimed.inc(labels, jobs.length);
    for (const j of jobs)
      this.queueLag.observeKeyed(
        label,
        labels,
        Math.max(0, j.claimed_at.getTime() - j.run_at.getTime()) / 1000,
      );
  }

  acked(jobs: { queue: string; claimed_at: Date | null; finished_at: Date | null }[]): void {
    // A batch ack is usually of one queue: count it with one increment per queue, not one per job.
    const counts = new Map<string, number>();
    for (const j of jobs) {
      const label = this.queue(j.queue);
      counts.set(label, (counts.get(label) ?? 0) + 1);
      if (j.claimed_at && j.finished_at) {
        this.claimToAck.observeKeyed(
          label,
          { queue: label },
          Math.max(0, j.finished_at.getTime() - j.claimed_at.getTime()) / 1000,
        );
      }
    }
    for (const [queue, n] of counts) this.jobsAcked.inc({ queue }, n);
  }

  nacked(queue: string, outcome: 'retry' | 'dead' | 'given_back'): void {
    this.jobsNacked.inc({ queue: this.queue(queue), outcome });
  }

  cancelled(queue: string, count: number): void {
    if (count > 0) this.jobsCancelled.inc({ queue: this.queue(queue) }, count);
  }

  renewed(queue: string): void {
    this.leasesRenewed.inc({ queue: this.queue(queue) });
  }

  leaseLost(queue: string, operation: 'renew' | 'ack' | 'nack'): void {
    this.leasesLost.inc({ queue: this.queue(queue), operation });
  }

  /** What a run of the schedules duty did (see maintenance/schedules.ts). */
  scheduleRun(run: {
    outcomes: { queue: string; outcome: string; n: number }[];
    jobs: { queue: string; latenessMs: number }[];
  }): void {
    for (const o of run.outcomes)
      this.scheduleOccurrences.inc({ queue: this.queue(o.queue), outcome: o.outcome }, o.n);
    for (const j of run.jobs)
      this.scheduleLateness.observe({ queue: this.queue(j.queue) }, j.latenessMs / 1000);
  }

  /** Set the queue-state gauges from the leader's maintained statistics (see plugins/metrics.ts). */
  setQueueStats(
    rows: { queue: string; counts: Record<string, number>; oldestReadySeconds: number }[],
    statsAgeSeconds: number | undefined,
  ): void {
    this.jobs.reset();
    this.oldestReadyJob.reset();
    const jobs = new Map<string, number>();
    const oldest = new Map<string, number>();
    for (const row of rows) {
      const label = this.queue(row.queue);
      for (const [state, n] of Object.entries(row.counts)) {
        const key = `${label}\u0000${state}`;
        jobs.set(key, (jobs.get(key) ?? 0) + n);
      }
      oldest.set(label, Math.max(oldest.get(label) ?? 0, row.oldestReadySeconds));
    }
    for (const [key, n] of jobs) {
      const [queue, state] = key.split('\u0000') as [string, string];
      this.jobs.set({ queue, state }, n);
    }
    for (const [queue, age] of oldest) this.oldestReadyJob.set({ queue }, age);
    if (statsAgeSeconds !== undefined) this.statsAge.set(statsAgeSeconds);
  }

  private queueCounter(name: string, help: string) {
    return new Counter({ name, help, labelNames: ['queue'], registers: [this.registry] });
  }
}
