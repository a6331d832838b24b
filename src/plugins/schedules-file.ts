import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import type { FileSchedule } from '../schedules/file.js';

export interface SchedulesFilePluginOptions {
  /** BATON_SCHEDULES_FILE's schedules, read and checked at start-up (startup-inputs.ts); undefined: unset. */
  schedules: FileSchedule[] | undefined;
}

/** Applies BATON_SCHEDULES_FILE once the app is ready (service/schedules.ts, applyFile). */
export default fp<SchedulesFilePluginOptions>(
  async function schedulesFile(app: FastifyInstance, { schedules }) {
    if (!schedules) return;
    app.addHook('onReady', async () => {
      await app.service.schedules.applyFile(schedules, app.log);
    });
  },
  { name: 'schedules-file', fastify: '5.x', dependencies: ['service'] },
);
