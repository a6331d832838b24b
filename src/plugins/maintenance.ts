import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { Maintainer } from '../maintenance/maintainer.js';

declare module 'fastify' {
  interface FastifyInstance {
    /** The maintenance service, when this replica takes part (BATON_MAINTENANCE). */
    maintainer: Maintainer | undefined;
  }
}

/** Starts leader election and the maintenance duties once the app is ready; resigns on close. */
export default fp(
  async function maintenance(app: FastifyInstance) {
    const maintainer = app.maintenanceDb
      ? new Maintainer({
          db: app.maintenanceDb,
          electionDb: app.electionDb,
          metrics: app.metrics,
          log: app.log,
          jobsReady: (queue, count) => app.wake.notifier.jobsReady(queue, count),
          jobsFinished: (ids) => app.wake.notifier.jobsFinished(ids.map((id) => ({ id }))),
          publishFloors: (floors, ttlMs) => app.wake.notifier.publishFloors(floors, ttlMs),
          config: app.config,
        })
      : undefined;
    app.decorate('maintainer', maintainer);
    app.addHook('onReady', async () => maintainer?.start());
    app.addHook('onClose', async () => maintainer?.stop());
  },
  { name: 'maintenance', fastify: '5.x', dependencies: ['database', 'metrics', 'wake'] },
);
