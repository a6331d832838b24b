import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { Releaser } from '../maintenance/releaser.js';

declare module 'fastify' {
  interface FastifyInstance {
    /** Releases children of finished parents, step by step (maintenance/releaser.ts). */
    releaser: Releaser;
  }
}

/**
 * Every replica runs a releaser (not only the leader, and whatever BATON_MAINTENANCE says: a release
 * is part of a job's lifecycle) on its own connection (plugins/database.ts, releaseDb), woken by the
 * database's notice that a parent finished, and polling as often as a long-poll does in case a
 * notice was missed. Stopped on close, after its step.
 */
export default fp(
  async function releaser(app: FastifyInstance) {
    const releaser = new Releaser(
      app.releaseDb,
      app.metrics,
      app.log,
      (ids) => app.wake.notifier.jobsFinished(ids.map((id) => ({ id }))),
      app.config.pollIntervalMs,
    );
    app.decorate('releaser', releaser);
    app.wake.listener.onParentsFinished = () => releaser.wake();
    app.addHook('onReady', async () => releaser.start());
    app.addHook('onClose', async () => releaser.stop());
  },
  { name: 'releaser', fastify: '5.x', dependencies: ['database', 'metrics', 'wake'] },
);
