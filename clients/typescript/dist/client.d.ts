import { type ConnectionOptions } from './http.js';
import { type BatchEnqueuedJob, type EnqueuedJob, type EnqueueOptions, type EnqueueRequest, type Job, type RelatedJobList } from './types.js';
/** W3C trace context of the caller, to be handed to the jobs it enqueues. */
export interface TraceContext {
    traceparent?: string;
    tracestate?: string;
}
export interface ClientOptions extends ConnectionOptions {
    /**
     * Returns the current trace context; used for every job enqueued without its own traceparent.
     * With OpenTelemetry: `() => { const c = {}; propagation.inject(context.active(), c); return c; }`.
     */
    traceContext?: () => TraceContext | undefined;
}
/**
 * Enqueue jobs, read them, await their end, cancel them.
 *
 * Transient failures (429, 503, a lost connection, a timeout) are retried with backoff, honouring
 * Retry-After, up to maxRetries times. An enqueue is retried only when it certainly did not reach
 * Baton (connection refused, 429), unless it carries an idempotency_key: then a repeat returns the
 * job the first try created, and every transient failure is retried.
 */
export declare class Client {
    private readonly http;
    private readonly traceContext;
    constructor(options?: ClientOptions);
    /** The base URL requests go to. */
    get url(): string;
    /** Close the client's kept-alive connections. Optional: idle ones never keep a process alive. */
    close(): void;
    /** Enqueue one job; answers it (an existing one when its idempotency or unique key matched). */
    enqueue(queue: string, payload: unknown, options?: EnqueueOptions): Promise<EnqueuedJob>;
    /**
     * Enqueue up to 1,000 jobs in one request, all or none: each is its payload and options. A job's
     * depends_on may name existing job ids, or `{ item: n }` for the n-th job of this batch (0-based).
     */
    enqueueBatch(queue: string, jobs: EnqueueRequest[]): Promise<BatchEnqueuedJob[]>;
    /** The job now: state, attempts, result, progress, errors, ... */
    get(id: string): Promise<Job>;
    /**
     * Wait for the job to finish (completed, dead or cancelled) and answer it (its `result`, or
     * `last_error`). Waits without end unless timeoutMs is given; then rejects with a BatonError
     * `await_timeout` if the job is still live.
     */
    await(id: string, options?: {
        timeoutMs?: number;
    }): Promise<Job>;
    /**
     * Wait for every job to finish; answers them in the order given. Rejects with a BatonError
     * not_found naming the ids of no job, or await_timeout after timeoutMs.
     */
    awaitMany(ids: string[], options?: {
        timeoutMs?: number;
    }): Promise<Job[]>;
    /**
     * Cancel a job that has not finished; answers the cancelled job (a cancelled one again too). A
     * completed or dead job is a 409 invalid_state.
     */
    cancel(id: string): Promise<Job>;
    /** A page of the job's parents (its depends_on), with their outcomes and results. */
    parents(id: string, page?: {
        limit?: number;
        cursor?: string;
    }): Promise<RelatedJobList>;
    /** A page of the jobs that depend on this one. */
    children(id: string, page?: {
        limit?: number;
        cursor?: string;
    }): Promise<RelatedJobList>;
    private related;
    /**
     * Any other endpoint (`/v1/queues/...`, `/v1/jobs/bulk`, ...), with the same key, errors and
     * retries: GET, PUT and DELETE (safe to repeat) on any transient failure, a POST only when it
     * certainly did not reach Baton. Answers the JSON body.
     */
    request<T = unknown>(method: 'GET' | 'POST' | 'PUT' | 'DELETE', path: string, options?: {
        body?: unknown;
        query?: Record<string, string | number | undefined>;
    }): Promise<T>;
    /** The job with the caller's trace context, unless it carries its own. */
    private traced;
}
