import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { Metrics } from '../metrics/metrics.js';

declare module 'fastify' {
  interface FastifyInstance {
    metrics: Metrics;
  }
}

/** The app's Prometheus metrics, and GET /metrics in the Prometheus text format. */
export default fp(
  async function metrics(app: FastifyInstance) {
    const m = new Metrics();
    app.decorate('metrics', m);
    app.get('/metrics', async (_request, reply) => {
      reply.type(m.registry.contentType);
      return m.registry.metrics();
    });
  },
  { name: 'metrics', fastify: '5.x' },
);
