import { Counter, Gauge, Registry } from 'prom-client';

/**
 * Every Prometheus metric Baton exports, declared once. One instance per app (not prom-client's
 * global registry), so several apps in one process (tests, benchmarks) do not share counters.
 * Label sets stay bounded: queue names and fixed outcomes, never ids or tokens.
 */
export class Metrics {
  readonly registry = new Registry();

  readonly leader = new Gauge({
    name: 'baton_leader',
    help: '1 while this replica is the maintenance leader, else 0.',
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

  readonly prune = new Counter({
    name: 'baton_prune_total',
    help: 'Prune attempts by outcome: pruned, noop, blocked (a lock timeout; rolled back, retried later) or error.',
    labelNames: ['outcome'],
    registers: [this.registry],
  });

  readonly jobsPruned = new Counter({
    name: 'baton_jobs_pruned_total',
    help: 'Finished jobs removed after their retention.',
    registers: [this.registry],
  });

  readonly keysExpired = new Counter({
    name: 'baton_idempotency_keys_expired_total',
    help: 'Idempotency keys removed after their retention.',
    registers: [this.registry],
  });

  readonly queuesCollected = new Counter({
    name: 'baton_queues_collected_total',
    help: 'Idle auto-created queues removed by the leader.',
    registers: [this.registry],
  });

  constructor() {
    this.leader.set(0);
    for (const outcome of ['pruned', 'noop', 'blocked', 'error']) this.prune.inc({ outcome }, 0);
    for (const outcome of ['ready', 'dead']) this.leasesRearmed.inc({ outcome }, 0);
  }
}
