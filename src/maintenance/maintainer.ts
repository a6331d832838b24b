import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { Config } from '../config.js';
import type { Db } from '../db/database.js';
import { faultFields, isUnavailableError, logFieldsOf } from '../db/errors.js';
import type { ClaimFloor } from '../jobs/claim/floors.js';
import type { Log } from '../logger.js';
import type { Metrics } from '../metrics/metrics.js';
import { ClaimFloorsDuty } from './claim-floors.js';
import { type Duty, type JobsFinished, type JobsReady, MAINTENANCE_BATCH } from './duty.js';
import { ExpireKeysDuty } from './expire-keys.js';
import { ExpiryDuty } from './expiry.js';
import { GroupStatsDuty } from './group-stats.js';
import { HistoryPartitionsDuty } from './history-partitions.js';
import { JobEdgesDuty } from './job-edges.js';
import { Leadership } from './leadership.js';
import { MessageMovesDuty } from './message-moves.js';
import { PromoteDuty } from './promote.js';
import { PruneDuty } from './prune.js';
import { QueueGcDuty } from './queue-gc.js';
import { QueueHistoryDuty } from './queue-history.js';
import { QueueStatsDuty } from './queue-stats.js';
import { RearmDuty } from './rearm.js';
import { RingDuty } from './ring.js';
import { SchedulesDuty } from './schedules.js';
import { VacuumDuty } from './vacuum.js';
import { WorkersDuty } from './workers.js';

/**
 * A claimed job is carried out of a sealed slot once it has run this long: most jobs are acked
 * sooner, and an ack is cheaper than a carry.
 */
const CARRY_AFTER_MS = 1000;

/** History's day partitions are checked once a minute: they change once a day. */
const HISTORY_PARTITIONS_INTERVAL_MS = 60_000;

export interface MaintainerDeps {
  db: Db;
  /** The election's own connection (plugins/database.ts); `db` if none. */
  electionDb?: Db;
  metrics: Metrics;
  log: Log;
  jobsReady: JobsReady;
  /** Told the ids of jobs a duty finished (re-armed to dead, expired): their awaiters wake. */
  jobsFinished?: JobsFinished;
  /** Puts claim floors in force on every replica (claim-floors.ts; Notifier.publishFloors). */
  publishFloors?: (floors: Record<string, ClaimFloor>, ttlMs: number) => void;
  config: Pick<
    Config,
    | 'tickMs'
    | 'promoteIntervalMs'
    | 'pruneLockTimeoutMs'
    | 'ringIntervalMs'
    | 'ringLockTimeoutMs'
    | 'queueIdleMs'
    | 'completedRetentionMs'
    | 'deadRetentionMs'
    | 'vacuumDeadRows'
    | 'scheduleIntervalMs'
    | 'scheduleGraceMs'
    | 'autoCreateQueues'
    | 'maxAutoQueues'
    | 'defaultMaxAttempts'
  >;
}

/**
 * The maintenance service: takes part in leader election and, while leading, runs each duty on its
 * own timer. Each run is inside its own error boundary: a failing duty is logged and counted, and the
 * others carry on. `start()`/`stop()` for the server; `runOnce()` runs every duty once, leader or
 * not, for tests and for operators.
 */
export class Maintainer {
  readonly leadership: Leadership;
  readonly duties: Duty[];
  private readonly timers = new Map<Duty, NodeJS.Timeout>();
  private readonly inFlight = new Set<Promise<unknown>>();
  private electionTimer: NodeJS.Timeout | undefined;
  private stopped = true;
  private leading = false;

  constructor(private readonly deps: MaintainerDeps) {
    const { db, metrics, jobsReady, config, log } = deps;
    const holder = `${hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`;
    this.leadership = new Leadership(deps.electionDb ?? db, holder, config.tickMs);
    const ring = new RingDuty(db, metrics, log, config.ringIntervalMs, {
      lockTimeoutMs: config.ringLockTimeoutMs,
      carryAfterMs: CARRY_AFTER_MS,
      carryBatch: MAINTENANCE_BATCH,
    });
    this.duties = [
      new RearmDuty(db, metrics, jobsReady, config.tickMs, MAINTENANCE_BATCH, deps.jobsFinished),
      new PromoteDuty(db, metrics, jobsReady, config.promoteIntervalMs),
      ring,
      new ClaimFloorsDuty(
        db,
        metrics,
        () => ring.pinned,
        deps.publishFloors ?? (() => {}),
        config.ringIntervalMs,
      ),
      new PruneDuty(db, metrics, config.tickMs, {
        lockTimeoutMs: config.pruneLockTimeoutMs,
        defaults: config,
      }),
      new HistoryPartitionsDuty(db, metrics, HISTORY_PARTITIONS_INTERVAL_MS, config.tickMs, {
        lockTimeoutMs: config.pruneLockTimeoutMs,
        defaults: config,
      }),
      new ExpireKeysDuty(db, metrics, config.tickMs),
      new JobEdgesDuty(db, config.tickMs),
      new MessageMovesDuty(db, jobsReady, config.tickMs),
      new WorkersDuty(db),
      new ExpiryDuty(db, metrics, config.tickMs, MAINTENANCE_BATCH, deps.jobsFinished),
      new QueueGcDuty(db, metrics, config.tickMs, config.queueIdleMs),
      new QueueStatsDuty(db, config.tickMs),
      new GroupStatsDuty(db),
      // After queue_stats, so that runOnce() samples the counts it just took.
      new QueueHistoryDuty(db),
      new VacuumDuty(db, metrics, log, config.tickMs, config.vacuumDeadRows),
      new SchedulesDuty(db, metrics, log, jobsReady, {
        intervalMs: config.scheduleIntervalMs,
        graceMs: config.scheduleGraceMs,
        enqueue: {
          autoCreate: { enabled: config.autoCreateQueues, maxQueues: config.maxAutoQueues },
          defaultMaxAttempts: config.defaultMaxAttempts,
        },
      }),
    ];
  }

  /**
   * A duty that a feature outside this layer brings (the SQS endpoint's dead-letter forwarding):
   * it runs like the others, on the leader, in its own error boundary.
   */
  addDuty(duty: Duty): void {
    this.duties.push(duty);
    if (!this.stopped) this.schedule(duty, duty.nextRunInMs(undefined));
  }

  get isLeader(): boolean {
    return this.leadership.isLeader;
  }

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    void this.elect();
    for (const duty of this.duties) this.schedule(duty, duty.nextRunInMs(undefined));
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.electionTimer);
    for (const timer of this.timers.values()) clearTimeout(timer);
    this.timers.clear();
    await Promise.allSettled([...this.inFlight]);
    if (this.leading) {
      await this.leadership
        .resign()
        .catch((err) => this.deps.log.warn(logFieldsOf(err), 'could not resign leadership'));
      this.deps.log.info({ holder: this.leadership.holder }, 'resigned maintenance leadership');
    }
    this.leading = false;
    this.deps.metrics.leader.set(0);
  }

  /** Run every duty once, each in its own error boundary; results by duty name (undefined on error). */
  async runOnce(): Promise<Record<string, unknown>> {
    const out: Record<string, unknown> = {};
    for (const duty of this.duties) out[duty.name] = await this.run(duty);
    return out;
  }

  /**
   * Elect every tick/4; the lease lasts one tick (see leadership.ts for the timing argument). The
   * next attempt is timed from this one's start, so a slow round trip does not stretch the gap
   * between renewals past half a lease (it did on a loaded machine, and the leader let go for a
   * moment with nobody else leading).
   */
  private async elect(): Promise<void> {
    const startedAt = Date.now();
    try {
      const leads = await this.track(this.leadership.tryLead());
      const gap = this.leadership.gap;
      if (gap) this.deps.metrics.leaderGap.observe({ kind: gap.kind }, gap.ms / 1000);
      if (leads !== this.leading) {
        this.deps.log.info(
          { holder: this.leadership.holder },
          leads ? 'became maintenance leader' : 'lost maintenance leadership',
        );
        // A new leader starts its duties now rather than at their next timer.
        if (leads) for (const duty of this.duties) this.schedule(duty, 0);
      }
      this.leading = leads;
    } catch (err) {
      this.leadership.demote();
      if (this.leading) this.deps.log.warn(logFieldsOf(err), 'leader election failed; stepping down');
      this.leading = false;
    }
    this.deps.metrics.leader.set(this.leading ? 1 : 0);
    if (!this.stopped) {
      const wait = this.deps.config.tickMs / 4 - (Date.now() - startedAt);
      this.electionTimer = setTimeout(() => void this.elect(), Math.max(50, wait));
    }
  }

  private schedule(duty: Duty, delayMs: number): void {
    if (this.stopped) return;
    clearTimeout(this.timers.get(duty));
    this.timers.set(
      duty,
      setTimeout(async () => {
        const result = this.leadership.isLeader ? await this.run(duty) : undefined;
        this.schedule(duty, duty.nextRunInMs(result));
      }, delayMs),
    );
  }

  /** One run of one duty inside its error boundary. */
  private async run(duty: Duty): Promise<unknown> {
    const { metrics, log } = this.deps;
    try {
      const result = await this.track(duty.runOnce());
      metrics.maintenanceRuns.inc({ duty: duty.name, outcome: 'ok' });
      metrics.maintenanceLastSuccess.set({ duty: duty.name }, Date.now() / 1000);
      return result;
    } catch (err) {
      metrics.maintenanceRuns.inc({ duty: duty.name, outcome: 'error' });
      // An outage is expected now and then (the duty runs again at its next tick): one line, no stack.
      if (isUnavailableError(err))
        log.warn({ ...faultFields(err), duty: duty.name }, 'maintenance duty failed');
      else log.error({ err, duty: duty.name }, 'maintenance duty failed');
      return undefined;
    }
  }

  private track<T>(promise: Promise<T>): Promise<T> {
    this.inFlight.add(promise);
    return promise.finally(() => this.inFlight.delete(promise));
  }
}
