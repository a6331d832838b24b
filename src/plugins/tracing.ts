import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { NO_TRACING, type Tracing } from '../tracing/tracing.js';

declare module 'fastify' {
  interface FastifyInstance {
    /** Baton's spans (tracing/): NO_TRACING unless an OTLP endpoint is configured. */
    tracing: Tracing;
  }
}

/**
 * Spans, when OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT is set (and
 * OTEL_SDK_DISABLED is not): the SDK is imported then, not before, so a replica without tracing
 * loads none of it. Closed after everything that records spans, sending what is still buffered.
 */
export default fp(
  async function tracing(app: FastifyInstance) {
    const { config } = app;
    const endpoint = config.otelTracesEndpoint ?? config.otelEndpoint;
    if (config.otelSdkDisabled || endpoint === undefined) {
      app.decorate('tracing', NO_TRACING);
      return;
    }
    const { createTracing, tracesUrl } = await import('../tracing/otel.js');
    const tracing = createTracing(config, app.log);
    app.decorate('tracing', tracing);
    app.log.info({ url: tracesUrl(config), sampler: config.otelTracesSampler }, 'tracing: sending spans');
    app.addHook('onClose', async () => {
      await tracing.shutdown();
    });
  },
  { name: 'tracing', fastify: '5.x' },
);
