import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { PushDispatcher } from '../delivery/dispatcher.js';

declare module 'fastify' {
  interface FastifyInstance {
    /** Delivers push queues' jobs (push/dispatcher.ts); undefined with BATON_PUSH=false. */
    pushDispatcher: PushDispatcher | undefined;
  }
}

/**
 * Every replica delivers push queues (unless BATON_PUSH=false): started once the app is ready,
 * stopped before the server closes, while the database is still there to give jobs back on. A
 * change made through this replica's API is served at once; another replica's within two seconds.
 */
export default fp(
  async function push(app: FastifyInstance) {
    const dispatcher = app.config.push
      ? new PushDispatcher({
          db: app.db,
          service: app.service,
          allowList: app.service.push.allowList,
          metrics: app.metrics,
          log: app.log,
          maxAnswerBytes: app.config.payloadLimitBytes,
          tracing: app.tracing,
        })
      : undefined;
    app.decorate('pushDispatcher', dispatcher);
    if (!dispatcher) return;
    app.service.push.onChange = () => void dispatcher.refresh().catch(() => {});
    app.addHook('onReady', async () => dispatcher.start());
    app.addHook('preClose', async () => dispatcher.stop());
  },
  { name: 'push', fastify: '5.x', dependencies: ['database', 'metrics', 'service', 'tracing'] },
);
