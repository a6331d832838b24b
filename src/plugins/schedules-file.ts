import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { applySchedulesFile, type FileSchedule } from '../schedules/file.js';

export interface SchedulesFilePluginOptions {
  /** BATON_SCHEDULES_FILE's schedules, read and checked at start-up (startup-inputs.ts); undefined: unset. */
  schedules: FileSchedule[] | undefined;
}

/**
 * Applies BATON_SCHEDULES_FILE once the app is ready, on every replica and every start; the drift
 * rule is in schedules/file.ts. A file the database refuses stops the start, naming the schedule.
 */
export default fp<SchedulesFilePluginOptions>(
  async function schedulesFile(app: FastifyInstance, { schedules }) {
    if (!schedules) return;
    app.addHook('onReady', async () => {
      await applySchedulesFile(app.db, schedules, app.log, app.config.scheduleMinIntervalMs);
    });
  },
  { name: 'schedules-file', fastify: '5.x', dependencies: ['database'] },
);
