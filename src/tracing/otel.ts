import {
  type Context,
  DiagLogLevel,
  diag,
  type Link,
  ROOT_CONTEXT,
  type Span,
  type SpanContext,
  SpanKind,
  SpanStatusCode,
  trace,
} from '@opentelemetry/api';
import { parseTraceParent, TraceState } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BatchSpanProcessor,
  ParentBasedSampler,
  type Sampler,
  TraceIdRatioBasedSampler,
  TracerProvider,
} from '@opentelemetry/sdk-trace';
import type { Config } from '../config.js';
import type { TraceContext } from '../jobs/trace-context.js';
import type { Log } from '../logger.js';
import { BATON_VERSION } from '../version.js';
import { MAX_LINKS, type OpenSpan, type SpanStart, type Tracing } from './tracing.js';

/**
 * Tracing through the OpenTelemetry SDK, exporting OTLP over HTTP (JSON) in batches. Imported only
 * when an endpoint is configured (plugins/tracing.ts), so a replica without one loads none of it.
 *
 * The SDK is used without a global context manager or a registered provider: Baton's spans take
 * their parent from the trace a request or a job carries (W3C traceparent, tracestate), never from
 * async context, so nothing here patches Node or reaches into other libraries.
 */
export type TracingConfig = Pick<
  Config,
  | 'otelTracesEndpoint'
  | 'otelEndpoint'
  | 'otelHeaders'
  | 'otelServiceName'
  | 'otelResourceAttributes'
  | 'otelTracesSampler'
  | 'otelTracesSamplerArg'
>;

/** Where spans go: the traces endpoint as given, else the general endpoint's /v1/traces. */
export function tracesUrl(config: Pick<Config, 'otelTracesEndpoint' | 'otelEndpoint'>): string | undefined {
  return config.otelTracesEndpoint ?? (config.otelEndpoint && `${config.otelEndpoint}/v1/traces`);
}

const KINDS = {
  internal: SpanKind.INTERNAL,
  client: SpanKind.CLIENT,
  producer: SpanKind.PRODUCER,
  consumer: SpanKind.CONSUMER,
} as const;

/**
 * The span context a traceparent (and tracestate) names, as a remote one; undefined if invalid.
 * Parsed directly rather than through the propagator and a context per link: a claim of 100 jobs
 * links 100 of them.
 */
function spanContextOf(traceContext: TraceContext): SpanContext | undefined {
  const parsed = parseTraceParent(traceContext.traceparent);
  if (!parsed) return undefined;
  return traceContext.tracestate
    ? { ...parsed, traceState: new TraceState(traceContext.tracestate) }
    : parsed;
}

function contextOf(traceContext: TraceContext): Context {
  const spanContext = spanContextOf(traceContext);
  return spanContext ? trace.setSpanContext(ROOT_CONTEXT, spanContext) : ROOT_CONTEXT;
}

function linkOf(traceContext: TraceContext): Link | undefined {
  const spanContext = spanContextOf(traceContext);
  return spanContext && { context: spanContext };
}

/** A span's context as W3C headers: what a job carries, or a push sends. */
function traceOfSpan(span: Span): TraceContext {
  const { traceId, spanId, traceFlags, traceState } = span.spanContext();
  const traceparent = `00-${traceId}-${spanId}-${traceFlags & 1 ? '01' : '00'}`;
  const tracestate = traceState?.serialize();
  return tracestate ? { traceparent, tracestate } : { traceparent };
}

function samplerOf(config: TracingConfig): Sampler {
  const ratio = () => new TraceIdRatioBasedSampler(config.otelTracesSamplerArg);
  switch (config.otelTracesSampler) {
    case 'always_on':
      return new AlwaysOnSampler();
    case 'always_off':
      return new AlwaysOffSampler();
    case 'traceidratio':
      return ratio();
    case 'parentbased_always_off':
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case 'parentbased_traceidratio':
      return new ParentBasedSampler({ root: ratio() });
    default:
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
  }
}

class SdkSpan implements OpenSpan {
  readonly context: TraceContext;
  constructor(private readonly span: Span) {
    this.context = traceOfSpan(span);
  }
  set(attributes: Record<string, string | number | boolean>): void {
    this.span.setAttributes(attributes);
  }
  fail(err: unknown): void {
    const message = err instanceof Error ? err.message : String(err);
    this.span.setStatus({ code: SpanStatusCode.ERROR, message });
    if (err instanceof Error) this.span.recordException(err);
  }
  end(): void {
    this.span.end();
  }
}

export function createTracing(config: TracingConfig, log: Log): Tracing {
  const url = tracesUrl(config);
  if (!url) throw new Error('createTracing needs an OTLP endpoint');
  // The SDK reports a failed export through its diagnostics logger: one warning line each, not silence.
  diag.setLogger(
    {
      error: (message) => log.warn({ url }, `tracing: ${message}`),
      warn: (message) => log.warn({ url }, `tracing: ${message}`),
      info: () => {},
      debug: () => {},
      verbose: () => {},
    },
    { logLevel: DiagLogLevel.WARN, suppressOverrideMessage: true },
  );
  const provider = new TracerProvider({
    resource: resourceFromAttributes({
      ...config.otelResourceAttributes,
      'service.name': config.otelServiceName,
      'service.version': BATON_VERSION,
    }),
    sampler: samplerOf(config),
    spanLimits: { linkCountLimit: MAX_LINKS },
    spanProcessors: [
      new BatchSpanProcessor({
        exporter: new OTLPTraceExporter({ url, headers: config.otelHeaders }),
        // Spans wait at most a second to be sent; a collector that is down drops spans, never requests.
        scheduledDelayMillis: 1000,
        maxQueueSize: 8192,
        maxExportBatchSize: 512,
      }),
    ],
  });
  const tracer = provider.getTracer('baton', BATON_VERSION);
  return {
    enabled: true,
    start(name: string, opts: SpanStart): OpenSpan {
      const links = opts.links?.flatMap((t) => linkOf(t) ?? []);
      const span = tracer.startSpan(
        name,
        {
          kind: KINDS[opts.kind],
          ...(opts.attributes ? { attributes: opts.attributes } : {}),
          ...(links?.length ? { links } : {}),
          ...(opts.startTime === undefined ? {} : { startTime: opts.startTime }),
        },
        opts.parent ? contextOf(opts.parent) : ROOT_CONTEXT,
      );
      return new SdkSpan(span);
    },
    // A collector that cannot be reached loses the last spans; it does not fail the replica's close.
    shutdown: () =>
      provider
        .shutdown()
        .catch((err: Error) =>
          log.warn({ url, error: err.message }, 'tracing: the last spans were not sent'),
        ),
  };
}
