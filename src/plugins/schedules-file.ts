import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { applySchedulesFile } from '../schedules/file.js';

/**
 * Applies BATON_SCHEDULES_FILE (read and checked by config.ts) once the app is ready, on every
 * replica and every start; the drift rule is in schedules/file.ts. A file the database refuses stops
 * the start, naming the schedule.
 */
export default fp(
  async function schedulesFile(app: FastifyInstance) {
    const schedules = app.config.schedulesFile;
    if (!schedules) return;
    app.addHook('onReady', async () => {
      await applySchedulesFile(app.db, schedules, app.log, app.config.scheduleMinIntervalMs);
    });
  },
  { name: 'schedules-file', fastify: '5.x', dependencies: ['database'] },
);
