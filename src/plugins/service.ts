import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { createService, type Service } from '../service/service.js';

declare module 'fastify' {
  interface FastifyInstance {
    /** The replica's use cases (src/service/): what every route and SQS action calls. */
    service: Service;
  }
}

/** Builds the replica's one Service from the database, the metrics, the spans and the wake-ups. */
export default fp(
  async function service(app: FastifyInstance) {
    app.decorate(
      'service',
      createService({
        db: app.db,
        log: app.log,
        config: app.config,
        metrics: app.metrics,
        tracing: app.tracing,
        notifier: app.wake.notifier,
        waitList: app.wake.waitList,
        awaitSlots: app.wake.awaitSlots,
        shuttingDown: () => app.shuttingDown,
      }),
    );
  },
  { name: 'service', fastify: '5.x', dependencies: ['database', 'metrics', 'tracing', 'wake'] },
);
