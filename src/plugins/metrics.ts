import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { Type } from 'typebox';
import { logFieldsOf } from '../db/errors.js';
import { isProbe } from '../http/probes.js';
import { problemResponse } from '../http/schemas/responses.js';
import { Metrics } from '../metrics/metrics.js';
import { statsForMetrics } from '../queues/queue-store.js';

declare module 'fastify' {
  interface FastifyInstance {
    metrics: Metrics;
  }
}

/** Upper bound on queue_stats rows read per scrape. */
const STATS_ROWS_PER_SCRAPE = 10_000;

/**
 * The app's Prometheus metrics: request durations for every route, and GET /metrics. The queue
 * gauges are filled at scrape time from baton.queue_stats, which the leader keeps: one small read,
 * never a count, and every replica reports the same values.
 */
export default fp(
  async function metrics(app: FastifyInstance) {
    const m = new Metrics(app.config.metricsMaxQueues);
    app.decorate('metrics', m);

    // Callback-style: an async hook costs a promise and a microtask turn on every request.
    app.addHook('onResponse', (request, reply, done) => {
      if (!isProbe(request)) {
        const route = request.routeOptions.url ?? 'unmatched';
        const statusClass = `${Math.floor(reply.statusCode / 100)}xx`;
        m.httpDuration.observeKeyed(
          `${request.method} ${statusClass} ${route}`,
          { method: request.method, route, status_class: statusClass },
          reply.elapsedTime / 1000,
        );
      }
      done();
    });

    app.get(
      '/metrics',
      {
        config: { access: { endpoint: 'metrics' } },
        schema: {
          tags: ['operations'],
          operationId: 'getMetrics',
          security: [{}, { apiKey: [] }],
          summary: 'Prometheus metrics',
          description: 'Prometheus text format. docs/metrics.md lists every metric with an example alert.',
          response: {
            200: {
              description: 'Prometheus text exposition format.',
              content: { 'text/plain': { schema: Type.String() } },
            },
            503: problemResponse(503),
          },
        },
      },
      async (request, reply) => {
        try {
          const rows = await statsForMetrics(app.db, STATS_ROWS_PER_SCRAPE);
          m.setQueueStats(
            rows.map((r) => ({
              queue: r.queue,
              counts: {
                waiting: Number(r.waiting),
                scheduled: Number(r.scheduled),
                ready: Number(r.ready),
                claimed: Number(r.claimed),
                completed: Number(r.completed),
                dead: Number(r.dead),
                cancelled: Number(r.cancelled),
              },
              oldestReadySeconds: r.oldest_ready_seconds ?? 0,
            })),
            rows.length > 0
              ? Math.min(...rows.map((r) => r.age_seconds ?? Number.POSITIVE_INFINITY))
              : undefined,
          );
        } catch (err) {
          // A scrape must still answer during a database outage; queue gauges keep their last values.
          request.log.warn(logFieldsOf(err), 'could not read queue stats for /metrics');
        }
        m.dbPool.set({ state: 'total' }, app.dbPool.totalCount);
        m.dbPool.set({ state: 'idle' }, app.dbPool.idleCount);
        m.dbPool.set({ state: 'waiting' }, app.dbPool.waitingCount);
        reply.type(m.registry.contentType);
        return m.registry.metrics();
      },
    );
  },
  { name: 'metrics', fastify: '5.x', dependencies: ['database'] },
);
