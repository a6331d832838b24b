import type { Db } from '../db/database.js';
import type { EnqueueOptions } from '../jobs/enqueue/enqueue.js';
import type { Log } from '../logger.js';
import type { Metrics } from '../metrics/metrics.js';
import { type FireResult, fireDueSchedules } from '../schedules/fire.js';
import { msToNextDue } from '../schedules/store.js';
import type { Duty, JobsReady } from './duty.js';

/**
 * Schedules: enqueue every due occurrence of every cron schedule, exactly once (src/schedules/fire.ts
 * says how). A bounded round per run (one transaction of up to `batch` due schedules, read from the
 * due index, never the whole table), again at once while rounds are full. Otherwise the duty sleeps
 * until the earliest next occurrence (by the database's clock) or the interval, whichever is sooner,
 * so an occurrence is usually enqueued within milliseconds of its time and at worst one interval
 * late (a schedule made on another replica meanwhile).
 */

export interface SchedulesRun extends FireResult {
  /** From the database's now() to the earliest next occurrence, when the round was not full. */
  nextDueInMs?: number;
}

/** Schedules per transaction: 10,000 due in the same second take 20 short transactions. */
export const SCHEDULES_BATCH = 500;

export class SchedulesDuty implements Duty<SchedulesRun> {
  readonly name = 'schedules';

  constructor(
    private readonly db: Db,
    private readonly metrics: Metrics,
    private readonly log: Log,
    private readonly jobsReady: JobsReady,
    private readonly opts: {
      intervalMs: number;
      graceMs: number;
      enqueue: Omit<EnqueueOptions, 'idempotencyRetentionMs'>;
      batch?: number;
      /** Tests only: the database time to act at (a backdated or daylight-saving day). */
      now?: () => Date | undefined;
    },
  ) {}

  async runOnce(): Promise<SchedulesRun> {
    const result: SchedulesRun = await fireDueSchedules(this.db, {
      enqueue: this.opts.enqueue,
      graceMs: this.opts.graceMs,
      batch: this.opts.batch ?? SCHEDULES_BATCH,
      now: this.opts.now?.(),
    });
    this.metrics.scheduleRun(result);
    for (const f of result.failures)
      this.log.error({ schedule: f.name, err: f.error }, 'schedule failed to enqueue');
    if (result.outcomes.some((o) => o.outcome === 'duplicate')) {
      this.log.warn(
        { outcomes: result.outcomes },
        'schedule occurrence found already enqueued (idempotency key)',
      );
    }
    const ready = new Map<string, number>();
    for (const job of result.jobs) if (job.ready) ready.set(job.queue, (ready.get(job.queue) ?? 0) + 1);
    for (const [queue, n] of ready) this.jobsReady(queue, n);
    if (!result.more) result.nextDueInMs = await msToNextDue(this.db);
    return result;
  }

  nextRunInMs(last: SchedulesRun | undefined): number {
    if (last?.more) return 0;
    const due = last?.nextDueInMs;
    // Wake just after the next occurrence; never spin (rows another leader holds stay due for it).
    return due === undefined ? this.opts.intervalMs : Math.min(this.opts.intervalMs, Math.max(25, due + 5));
  }
}
