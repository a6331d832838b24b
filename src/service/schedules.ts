import type { Log } from '../logger.js';
import type { ScheduleDefinition } from '../schedules/definition.js';
import { applySchedulesFile, type FileSchedule } from '../schedules/file.js';
import { pauseSchedule, putSchedule, scheduleNotFound, triggerSchedule } from '../schedules/manage.js';
import { deleteSchedule, getSchedule, listSchedules, type ScheduleRow } from '../schedules/store.js';
import type { JobUseCases, ServiceDeps } from './jobs.js';

/**
 * Cron schedules as the API and BATON_SCHEDULES_FILE change them, and as the API reads them (the
 * leader fires them: maintenance/schedules.ts). `patterns` is a
 * queue-limited key's scope, applied in each statement: a schedule of another tenant's queue is not
 * found, and one may not be replaced by its name.
 */
export class ScheduleUseCases {
  constructor(
    private readonly deps: ServiceDeps,
    private readonly jobs: JobUseCases,
  ) {}

  /** Create or replace a schedule (under the server's caps); whether it was created, and the schedule. */
  async put(
    name: string,
    def: ScheduleDefinition,
    patterns?: string[],
  ): Promise<{ created: boolean; schedule: ScheduleRow }> {
    const { config, db } = this.deps;
    const { created } = await putSchedule(db, name, def, {
      autoCreateQueues: config.autoCreateQueues,
      limits: {
        minIntervalMs: config.scheduleMinIntervalMs,
        maxSchedules: config.maxSchedules,
        maxSchedulesPerKey: config.maxSchedulesPerKey,
      },
      ...(patterns ? { keyPatterns: patterns } : {}),
    });
    return { created, schedule: await this.get(name, patterns) };
  }

  /** A schedule, with its next and last run (not_found when there is none in scope). */
  async get(name: string, patterns?: string[]): Promise<ScheduleRow> {
    const row = await getSchedule(this.deps.db, name, patterns);
    if (!row) throw scheduleNotFound(name);
    return row;
  }

  /** A page of schedules in name order, after the name `after`. */
  list(limit: number, after?: string, patterns?: string[]): Promise<ScheduleRow[]> {
    return listSchedules(this.deps.db, limit, after, patterns);
  }

  /** No further occurrences; the jobs it enqueued stay. */
  async delete(name: string, patterns?: string[]): Promise<void> {
    if (!(await deleteSchedule(this.deps.db, name, patterns))) throw scheduleNotFound(name);
  }

  /** Pause or resume; the schedule as it is then. */
  async setPaused(name: string, paused: boolean, patterns?: string[]): Promise<ScheduleRow> {
    await pauseSchedule(this.deps.db, name, paused, patterns);
    return this.get(name, patterns);
  }

  /**
   * Make the schedules BATON_SCHEDULES_FILE declares so (at every start, on every replica; the drift
   * rule is in schedules/file.ts). A file the database refuses stops the start, naming the schedule.
   */
  applyFile(schedules: FileSchedule[], log: Log) {
    return applySchedulesFile(this.deps.db, schedules, log, this.deps.config.scheduleMinIntervalMs);
  }

  /** Enqueue one occurrence now; the job counts and wakes claims as any enqueue does. */
  async trigger(name: string, patterns?: string[]) {
    const { result } = await triggerSchedule(this.deps.db, name, this.jobs.enqueueOptions, patterns);
    this.jobs.enqueued(result.job.queue, [result]);
    return result;
  }
}
