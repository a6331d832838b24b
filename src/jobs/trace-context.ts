/**
 * W3C Trace Context (https://www.w3.org/TR/trace-context/) carried by a job: the producer's
 * `traceparent` and `tracestate`, stored with the job (in its meta, under `trace`) and handed to
 * every worker that claims it, so a worker in any language continues the producer's trace. Baton
 * does not trace itself; it only carries the context.
 */
export interface TraceContext {
  traceparent: string;
  tracestate?: string;
}

/**
 * version-traceId-parentId-flags, lower-case hex. Version ff is invalid, and an all-zero trace or
 * parent id. A future version may append fields after the flags ("-..."); version 00 may not.
 */
export const TRACEPARENT_PATTERN = '^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}(-[ -~]*)?$';
const TRACEPARENT = new RegExp(TRACEPARENT_PATTERN);
/** The specification's limit for what a vendor must propagate; list members are printable ASCII. */
export const TRACESTATE_MAX = 512;
export const TRACESTATE_PATTERN = '^[ -~]*$';
const TRACESTATE = new RegExp(TRACESTATE_PATTERN);

export function isTraceparent(value: string): boolean {
  if (!TRACEPARENT.test(value)) return false;
  const [version, traceId, parentId] = value.split('-') as [string, string, string];
  if (version === 'ff' || /^0+$/.test(traceId) || /^0+$/.test(parentId)) return false;
  return version !== '00' || value.length === 55;
}

export const isTracestate = (value: string): boolean =>
  value.length > 0 && value.length <= TRACESTATE_MAX && TRACESTATE.test(value);

/**
 * The context in request headers, as the specification asks a receiver to treat them: an invalid
 * traceparent is ignored (the job then carries none), and so is an invalid tracestate.
 */
export function traceFromHeaders(
  headers: Record<string, string | string[] | undefined>,
): TraceContext | undefined {
  const parent = single(headers.traceparent);
  if (parent === undefined || !isTraceparent(parent.trim())) return undefined;
  // Several tracestate headers are one list, joined with commas (RFC 9110 field lines).
  const state = Array.isArray(headers.tracestate) ? headers.tracestate.join(',') : headers.tracestate;
  const trimmed = state?.trim();
  return trimmed && isTracestate(trimmed)
    ? { traceparent: parent.trim(), tracestate: trimmed }
    : { traceparent: parent.trim() };
}

const single = (v: string | string[] | undefined) =>
  Array.isArray(v) ? (v.length === 1 ? v[0] : undefined) : v;

/** The context a job's meta carries, if any. */
export function traceOf(meta: unknown): TraceContext | undefined {
  const trace = (meta as { trace?: TraceContext } | null | undefined)?.trace;
  return trace && typeof trace.traceparent === 'string' ? trace : undefined;
}
