import type { TraceContext } from '../jobs/trace-context.js';

/**
 * Baton's own spans (docs/deploying.md, "Traces"): what the use cases and the push dispatcher record,
 * through this small interface so that nothing below plugins/tracing.ts imports OpenTelemetry. With
 * no OTLP endpoint configured the replica holds NO_TRACING: `enabled` is false, callers check it
 * before building a span's attributes, and the SDK is never loaded (tracing/otel.ts is imported
 * only when an endpoint is set).
 */
export interface Tracing {
  readonly enabled: boolean;
  /**
   * A span begun now, or at `startTime` (a span recorded once its outcome is known: an ack's parent
   * is the acked job's trace, read by the ack itself).
   */
  start(name: string, opts: SpanStart): OpenSpan;
  /** Sends what is still buffered and stops (the replica's close). */
  shutdown(): Promise<void>;
}

/** Span kinds, as OpenTelemetry's: a producer's span parents its message's consumers. */
export type SpanKind = 'internal' | 'client' | 'producer' | 'consumer';

export type SpanAttributes = Record<string, string | number | boolean>;

export interface SpanStart {
  kind: SpanKind;
  /** The trace this span continues; undefined starts a trace. */
  parent?: TraceContext;
  /** Other traces this span concerns (the jobs a claim handed out, say). */
  links?: TraceContext[];
  attributes?: SpanAttributes;
  /** Milliseconds since the epoch (performance.timeOrigin + performance.now()); undefined: now. */
  startTime?: number;
}

export interface OpenSpan {
  /** This span's context, to hand on: a job carries it to its workers, a push sends it. */
  readonly context: TraceContext | undefined;
  set(attributes: SpanAttributes): void;
  /** The operation failed: the span's status is an error, with the error's message. */
  fail(err: unknown): void;
  end(): void;
}

/**
 * A span links at most this many traces: a claim of 1,000 jobs links its first 128 (OpenTelemetry's
 * default span limit), and says how many it handed out in messaging.batch.message_count.
 */
export const MAX_LINKS = 128;

const NO_SPAN: OpenSpan = {
  context: undefined,
  set() {},
  fail() {},
  end() {},
};

export const NO_TRACING: Tracing = {
  enabled: false,
  start: () => NO_SPAN,
  shutdown: async () => {},
};

/** Now, in milliseconds since the epoch with a fraction: a span's startTime. */
export const spanClock = (): number => performance.timeOrigin + performance.now();

/**
 * The attributes of OpenTelemetry's messaging conventions a span of Baton's carries: the system, the
 * operation (its name and its type: send, receive, settle, process) and the queue.
 */
export function messagingAttributes(
  operation: string,
  type: 'send' | 'receive' | 'settle' | 'process',
  queue: string | undefined,
): SpanAttributes {
  return {
    'messaging.system': 'baton',
    'messaging.operation.name': operation,
    'messaging.operation.type': type,
    ...(queue === undefined ? {} : { 'messaging.destination.name': queue }),
  };
}

/** The distinct traces of `traces` other than `except`, at most MAX_LINKS. */
export function distinctTraces(
  traces: Iterable<TraceContext | undefined>,
  except?: TraceContext,
): TraceContext[] {
  const seen = new Map<string, TraceContext>();
  for (const trace of traces) {
    if (seen.size >= MAX_LINKS) break;
    if (trace === undefined || trace.traceparent === except?.traceparent) continue;
    if (!seen.has(trace.traceparent)) seen.set(trace.traceparent, trace);
  }
  return [...seen.values()];
}

/**
 * Run `work` in a span begun now that ends with it: failed if it throws. With tracing off it is
 * `work` itself, given a span that records nothing.
 */
export async function inSpan<T>(
  tracing: Tracing,
  name: string,
  opts: SpanStart | (() => SpanStart),
  work: (span: OpenSpan) => Promise<T>,
): Promise<T> {
  if (!tracing.enabled) return work(NO_SPAN);
  const span = tracing.start(name, typeof opts === 'function' ? opts() : opts);
  try {
    return await work(span);
  } catch (err) {
    span.fail(err);
    throw err;
  } finally {
    span.end();
  }
}

/**
 * Run `work`, then record its span, from when it began to now: for a span whose name, parent or links
 * only its outcome knows (an ack's parent is the acked job's trace; a claim links the jobs it handed
 * out). `describe` is given the result, or undefined when `work` threw (the span is then failed).
 * With tracing off it is `work` itself.
 */
export async function recorded<T>(
  tracing: Tracing,
  work: () => Promise<T>,
  describe: (result: T | undefined) => SpanStart & { name: string },
): Promise<T> {
  if (!tracing.enabled) return work();
  const startTime = spanClock();
  let result: T | undefined;
  let failure: { err: unknown } | undefined;
  try {
    result = await work();
    return result;
  } catch (err) {
    failure = { err };
    throw err;
  } finally {
    const { name, ...start } = describe(failure ? undefined : result);
    const span = tracing.start(name, { ...start, startTime });
    if (failure) span.fail(failure.err);
    span.end();
  }
}
