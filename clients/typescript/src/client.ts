import { BatonError } from './errors.js';
import { type ConnectionOptions, Http } from './http.js';
import {
  type BatchEnqueuedJob,
  type EnqueuedJob,
  type EnqueueOptions,
  type EnqueueRequest,
  FINISHED_STATES,
  type Job,
  type RelatedJobList,
} from './types.js';

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

/** Largest wait Baton holds an await for; longer awaits are several. */
const MAX_WAIT_MS = 60_000;
/** Most jobs per batch request (enqueue and await). */
const MAX_BATCH = 1000;

/**
 * Enqueue jobs, read them, await their end, cancel them.
 *
 * Transient failures (429, 503, a lost connection, a timeout) are retried with backoff, honouring
 * Retry-After, up to maxRetries times. An enqueue is retried only when it certainly did not reach
 * Baton (connection refused, 429), unless it carries an idempotency_key: then a repeat returns the
 * job the first try created, and every transient failure is retried.
 */
export class Client {
  private readonly http: Http;
  private readonly traceContext: (() => TraceContext | undefined) | undefined;

  constructor(options: ClientOptions = {}) {
    this.http = new Http(options);
    this.traceContext = options.traceContext;
  }

  /** The base URL requests go to. */
  get url(): string {
    return this.http.url;
  }

  /** Close the client's kept-alive connections. Optional: idle ones never keep a process alive. */
  close(): void {
    this.http.close();
  }

  /** Enqueue one job; answers it (an existing one when its idempotency or unique key matched). */
  async enqueue(queue: string, payload: unknown, options: EnqueueOptions = {}): Promise<EnqueuedJob> {
    const body = this.traced({ ...options, payload });
    return this.http.request<EnqueuedJob>({
      method: 'POST',
      path: `/v1/queues/${encodeURIComponent(queue)}/jobs`,
      body,
      retry: body.idempotency_key === undefined ? 'unsent' : 'any',
    });
  }

  /**
   * Enqueue up to 1,000 jobs in one request, all or none: each is its payload and options. A job's
   * depends_on may name existing job ids, or `{ item: n }` for the n-th job of this batch (0-based).
   */
  async enqueueBatch(queue: string, jobs: EnqueueRequest[]): Promise<BatchEnqueuedJob[]> {
    if (jobs.length > MAX_BATCH) throw new RangeError(`a batch holds at most ${MAX_BATCH} jobs`);
    const body = { jobs: jobs.map((job) => this.traced(job)) };
    const answer = await this.http.request<{ jobs: BatchEnqueuedJob[] }>({
      method: 'POST',
      path: `/v1/queues/${encodeURIComponent(queue)}/jobs/batch`,
      body,
      retry: body.jobs.every((job) => job.idempotency_key !== undefined) ? 'any' : 'unsent',
    });
    return answer.jobs;
  }

  /** The job now: state, attempts, result, progress, errors, ... */
  async get(id: string): Promise<Job> {
    return this.http.request<Job>({ method: 'GET', path: `/v1/jobs/${encodeURIComponent(id)}` });
  }

  /**
   * Wait for the job to finish (completed, dead or cancelled) and answer it (its `result`, or
   * `last_error`). Waits without end unless timeoutMs is given; then rejects with a BatonError
   * `await_timeout` if the job is still live.
   */
  async await(id: string, options: { timeoutMs?: number } = {}): Promise<Job> {
    const deadline = Date.now() + (options.timeoutMs ?? Number.POSITIVE_INFINITY);
    for (;;) {
      const waitMs = Math.max(0, Math.min(MAX_WAIT_MS, deadline - Date.now()));
      const job = await this.http.request<Job>({
        method: 'GET',
        path: `/v1/jobs/${encodeURIComponent(id)}`,
        query: { wait_ms: Math.round(waitMs) },
        holdMs: waitMs,
      });
      if (FINISHED_STATES.includes(job.state)) return job;
      if (Date.now() >= deadline) throw stillRunning([job], options.timeoutMs);
    }
  }

  /**
   * Wait for every job to finish; answers them in the order given. Rejects with a BatonError
   * not_found naming the ids of no job, or await_timeout after timeoutMs.
   */
  async awaitMany(ids: string[], options: { timeoutMs?: number } = {}): Promise<Job[]> {
    const deadline = Date.now() + (options.timeoutMs ?? Number.POSITIVE_INFINITY);
    const finished = new Map<string, Job>();
    let live = [...new Set(ids)];
    while (live.length) {
      const waitMs = Math.max(0, Math.min(MAX_WAIT_MS, deadline - Date.now()));
      const still: Job[] = [];
      for (let at = 0; at < live.length; at += MAX_BATCH) {
        const answer = await this.http.request<{ jobs: Job[]; not_found: string[]; omitted: string[] }>({
          method: 'POST',
          path: '/v1/jobs/await',
          body: { ids: live.slice(at, at + MAX_BATCH), wait_ms: Math.round(waitMs) },
          holdMs: waitMs,
        });
        if (answer.not_found.length)
          throw new BatonError({
            status: 404,
            code: 'not_found',
            detail: `no job ${answer.not_found.join(', ')}`,
          });
        const omitted = new Set(answer.omitted);
        for (const job of answer.jobs) {
          if (!FINISHED_STATES.includes(job.state)) still.push(job);
          // An answer leaves out the bodies past its byte budget: read those jobs whole.
          else finished.set(job.id, omitted.has(job.id) ? await this.get(job.id) : job);
        }
      }
      live = still.map((job) => job.id);
      if (live.length && Date.now() >= deadline) throw stillRunning(still, options.timeoutMs);
    }
    return ids.map((id) => finished.get(id)!);
  }

  /**
   * Cancel a job that has not finished; answers the cancelled job (a cancelled one again too). A
   * completed or dead job is a 409 invalid_state.
   */
  async cancel(id: string): Promise<Job> {
    const answerLost = { value: false };
    try {
      return await this.http.request<Job>({
        method: 'POST',
        path: `/v1/jobs/${encodeURIComponent(id)}/cancel`,
        answerLost,
      });
    } catch (err) {
      // A retry after a lost answer finds the job cancelled by the first try.
      if (err instanceof BatonError && err.status === 409 && answerLost.value) {
        const job = await this.get(id);
        if (job.state === 'cancelled') return job;
      }
      throw err;
    }
  }

  /** A page of the job's parents (its depends_on), with their outcomes and results. */
  async parents(id: string, page: { limit?: number; cursor?: string } = {}): Promise<RelatedJobList> {
    return this.related(id, 'parents', page);
  }

  /** A page of the jobs that depend on this one. */
  async children(id: string, page: { limit?: number; cursor?: string } = {}): Promise<RelatedJobList> {
    return this.related(id, 'children', page);
  }

  private related(id: string, which: string, page: { limit?: number; cursor?: string }) {
    return this.http.request<RelatedJobList>({
      method: 'GET',
      path: `/v1/jobs/${encodeURIComponent(id)}/${which}`,
      query: page,
    });
  }

  /**
   * Any other endpoint (`/v1/queues/...`, `/v1/jobs/bulk`, ...), with the same key, errors and
   * retries: GET, PUT and DELETE (safe to repeat) on any transient failure, a POST only when it
   * certainly did not reach Baton. Answers the JSON body.
   */
  async request<T = unknown>(
    method: 'GET' | 'POST' | 'PUT' | 'DELETE',
    path: string,
    options: { body?: unknown; query?: Record<string, string | number | undefined> } = {},
  ): Promise<T> {
    return this.http.request<T>({
      method,
      path,
      body: options.body,
      query: options.query,
      retry: method === 'POST' ? 'unsent' : 'any',
    });
  }

  /** The job with the caller's trace context, unless it carries its own. */
  private traced<T extends EnqueueRequest>(job: T): T {
    if (job.traceparent !== undefined || !this.traceContext) return job;
    const context = this.traceContext();
    if (!context?.traceparent) return job;
    return {
      ...job,
      traceparent: context.traceparent,
      ...(context.tracestate && job.tracestate === undefined ? { tracestate: context.tracestate } : {}),
    };
  }
}

function stillRunning(jobs: Job[], timeoutMs: number | undefined): BatonError {
  const states = jobs.map((job) => `${job.id} ${job.state}`).join(', ');
  return new BatonError({
    status: 0,
    code: 'await_timeout',
    detail: `not finished within ${timeoutMs} ms: ${states}`,
  });
}
