import http from 'node:http';
import https from 'node:https';
import { BatonError } from './errors.js';
import { jsonLinesToStderr, type Logger } from './logging.js';

/** How to reach Baton; shared by Client and Worker. */
export interface ConnectionOptions {
  /** Baton's base URL. Default: env BATON_URL, else http://127.0.0.1:8080. */
  url?: string;
  /** Sent as `Authorization: Bearer <apiKey>`. Default: env BATON_API_KEY (none when unset or empty). */
  apiKey?: string;
  /** How long a request may go unanswered, beyond any wait it asks Baton for. Default 30 000 ms. */
  timeoutMs?: number;
  /** How many times a Client call retries a transient failure (429, 503, connection lost, timeout). Default 5. */
  maxRetries?: number;
  /** Where events go (request_retry, and the worker's). Default: JSON lines on stderr. */
  logger?: Logger;
}

/** One API request. */
export interface Call {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  path: string;
  query?: Record<string, string | number | undefined>;
  body?: unknown;
  /** Aborts the request (and its retries); the promise rejects with the signal's reason. */
  signal?: AbortSignal;
  /**
   * `any` (default): a transient failure is retried (the request is safe to repeat). `unsent`: only
   * a request that certainly did not reach Baton is (connection refused, or a 429).
   */
  retry?: 'any' | 'unsent';
  /** Retry until this time (epoch ms) instead of maxRetries times. */
  retryUntil?: number;
  /** How long Baton may hold the request (a long-poll): added to the timeout. */
  holdMs?: number;
  /** Set to true when a failed try may have reached Baton: its answer, not the request, was lost. */
  answerLost?: { value: boolean };
}

const BASE_DELAY_MS = 100;
const MAX_DELAY_MS = 5_000;
export const VERSION = '0.1.0';

interface Failure {
  error: BatonError;
  /** Worth another try at all. */
  transient: boolean;
  /** Baton certainly did not act on it. */
  unsent: boolean;
}

interface Answer {
  status: number;
  statusText: string;
  headers: http.IncomingHttpHeaders;
  text: string;
}

/**
 * Sends requests to Baton: JSON in and out, problem+json errors as BatonError, retries with backoff.
 *
 * Over node:http with a keep-alive agent, not the global fetch: fetch (undici) cost about three
 * times the client CPU per request here (bench/load/http-client.ts), and after an aborted request
 * (a stopping worker's long-poll) it opened a fresh connection that it never used, which held up
 * the server's own shutdown until its keep-alive timeout.
 */
export class Http {
  readonly url: string;
  readonly logger: Logger;
  private readonly apiKey: string | undefined;
  private readonly timeoutMs: number;
  private readonly maxRetries: number;
  private readonly base: URL;
  private readonly agent: http.Agent;
  private readonly transport: typeof http.request;
  /** What every request shares, worked out once (a busy worker sends one request per job). */
  private readonly hostname: string;
  private readonly port: string | undefined;
  private readonly prefix: string;
  private readonly headers: Record<string, string>;

  constructor(options: ConnectionOptions = {}) {
    this.url = (options.url ?? process.env.BATON_URL ?? 'http://127.0.0.1:8080').replace(/\/+$/, '');
    this.apiKey = options.apiKey ?? (process.env.BATON_API_KEY || undefined);
    this.timeoutMs = options.timeoutMs ?? 30_000;
    this.maxRetries = options.maxRetries ?? 5;
    this.logger = options.logger ?? jsonLinesToStderr;
    this.base = new URL(this.url);
    if (this.base.protocol !== 'http:' && this.base.protocol !== 'https:')
      throw new TypeError(`url must be http:// or https://, not ${this.url}`);
    this.hostname = this.base.hostname.replace(/^\[|\]$/g, '');
    this.port = this.base.port || undefined;
    this.prefix = this.base.pathname.replace(/\/+$/, '');
    this.headers = { accept: 'application/json', 'user-agent': `baton-client-ts/${VERSION}` };
    if (this.apiKey) this.headers.authorization = `Bearer ${this.apiKey}`;
    const secure = this.base.protocol === 'https:';
    this.agent = secure ? new https.Agent({ keepAlive: true }) : new http.Agent({ keepAlive: true });
    this.transport = secure ? https.request : http.request;
  }

  /** Close the kept-alive connections (an idle one closes on its own after Baton's keep-alive timeout). */
  close(): void {
    this.agent.destroy();
  }

  async request<T>(call: Call): Promise<T> {
    for (let attempt = 0; ; attempt++) {
      const outcome = await this.try<T>(call);
      if (outcome.ok) return outcome.value;
      const { error, transient, unsent } = outcome.failure;
      if (!unsent && call.answerLost) call.answerLost.value = true;
      const retryable = transient && (call.retry !== 'unsent' || unsent);
      const delay = backoff(attempt, error.retryAfterMs);
      const outOfTries =
        call.retryUntil === undefined ? attempt >= this.maxRetries : Date.now() + delay >= call.retryUntil;
      if (!retryable || outOfTries) throw error;
      this.logger('warn', 'request_retry', {
        method: call.method,
        path: call.path,
        attempt: attempt + 1,
        delay_ms: Math.round(delay),
        status: error.status,
        code: error.code,
        detail: error.detail,
      });
      await sleep(delay, call.signal);
    }
  }

  private async try<T>(call: Call): Promise<{ ok: true; value: T } | { ok: false; failure: Failure }> {
    call.signal?.throwIfAborted();
    const timeoutMs = this.timeoutMs + (call.holdMs ?? 0);
    const sent = { value: false };
    try {
      const answer = await this.send(call, timeoutMs, sent);
      const body = parseJson(answer);
      if (answer.status >= 200 && answer.status < 300) {
        if (body === NOT_JSON)
          throw new BatonError({
            status: answer.status,
            code: 'http_error',
            detail: `${call.method} ${call.path} answered ${answer.status} without JSON: ${answer.text.slice(0, 200)}`,
          });
        return { ok: true, value: body as T };
      }
      return { ok: false, failure: answerFailure(answer, body === NOT_JSON ? undefined : body) };
    } catch (err) {
      if (call.signal?.aborted) throw call.signal.reason;
      if (err instanceof BatonError) throw err;
      const timedOut = (err as { code?: string }).code === 'BATON_TIMEOUT';
      const detail = timedOut
        ? `no answer from ${call.method} ${call.path} within ${timeoutMs} ms`
        : `${call.method} ${this.url}${call.path}: ${(err as { code?: string }).code ?? (err as Error).message}`;
      const error = new BatonError(
        { status: 0, code: timedOut ? 'timeout' : 'connection_failed', detail },
        { cause: err },
      );
      // A request that never got a connection certainly did not reach Baton.
      return { ok: false, failure: { error, transient: true, unsent: !sent.value } };
    }
  }

  /** One HTTP exchange; `sent` turns true once the request has a connection to go out on. */
  private send(call: Call, timeoutMs: number, sent: { value: boolean }): Promise<Answer> {
    const body = call.body === undefined ? undefined : JSON.stringify(call.body);
    const headers: Record<string, string | number> =
      body === undefined
        ? this.headers
        : { ...this.headers, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) };
    return new Promise((resolve, reject) => {
      const req = this.transport(
        {
          agent: this.agent,
          protocol: this.base.protocol,
          hostname: this.hostname,
          port: this.port,
          path: this.pathOf(call),
          method: call.method,
          headers,
          signal: call.signal,
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (chunk: Buffer) => chunks.push(chunk));
          res.on('end', () => {
            clearTimeout(timer);
            resolve({
              status: res.statusCode ?? 0,
              statusText: res.statusMessage ?? '',
              headers: res.headers,
              text: (chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)).toString('utf8'),
            });
          });
          res.on('error', reject);
        },
      );
      const timer = setTimeout(
        () => req.destroy(Object.assign(new Error('timed out'), { code: 'BATON_TIMEOUT' })),
        timeoutMs,
      );
      req.on('socket', (socket) => {
        if (!socket.connecting) sent.value = true;
        else socket.once('connect', () => (sent.value = true));
      });
      req.on('error', (err) => {
        clearTimeout(timer);
        reject(err);
      });
      req.end(body);
    });
  }

  private pathOf(call: Call): string {
    if (!call.query) return this.prefix + call.path;
    const query = new URLSearchParams();
    for (const [name, value] of Object.entries(call.query))
      if (value !== undefined) query.set(name, String(value));
    const search = query.toString();
    return `${this.prefix}${call.path}${search ? `?${search}` : ''}`;
  }
}

const NOT_JSON = Symbol('not JSON');

/** The answer's JSON body; undefined when it has none, NOT_JSON when it is not JSON. */
function parseJson(answer: Answer): unknown {
  if (!answer.text) return undefined;
  if (!answer.headers['content-type']?.toLowerCase().includes('json')) return NOT_JSON;
  try {
    return JSON.parse(answer.text);
  } catch {
    return NOT_JSON;
  }
}

function answerFailure(answer: Answer, body: unknown): Failure {
  const { status, text } = answer;
  const retryAfter = answer.headers['retry-after'];
  const retryAfterMs = parseRetryAfter(typeof retryAfter === 'string' ? retryAfter : null);
  const problem = body as Record<string, unknown> | undefined;
  const error =
    problem && typeof problem === 'object' && typeof problem.code === 'string'
      ? new BatonError({
          status,
          code: problem.code as BatonError['code'],
          detail: String(problem.detail ?? problem.title ?? ''),
          title: problem.title as string | undefined,
          type: problem.type as string | undefined,
          errors: Array.isArray(problem.errors) ? problem.errors : undefined,
          requestId: problem.request_id as string | undefined,
          retryAfterMs,
        })
      : new BatonError({
          status,
          code: 'http_error',
          detail: `${status} ${answer.statusText}: ${text.slice(0, 200)}`,
          retryAfterMs,
        });
  // A 429 is a refusal before anything was done; a 502/503/504 may follow a request that was.
  const transient = status === 429 || status === 502 || status === 503 || status === 504;
  return { error, transient, unsent: status === 429 };
}

/** Retry-After in seconds or as an HTTP date, in ms; undefined when absent or unreadable. */
function parseRetryAfter(header: string | null): number | undefined {
  if (!header) return undefined;
  if (/^\d+$/.test(header.trim())) return Number(header.trim()) * 1000;
  const at = Date.parse(header);
  return Number.isNaN(at) ? undefined : Math.max(0, at - Date.now());
}

/**
 * The wait before retry `attempt` (0-based): Retry-After when Baton sent one (plus up to a fifth more,
 * so that clients told the same do not return together), else exponential from 100 ms to 5 s with
 * jitter (half of it random).
 */
export function backoff(attempt: number, retryAfterMs?: number): number {
  if (retryAfterMs !== undefined) return retryAfterMs * (1 + Math.random() * 0.2);
  const ceiling = Math.min(MAX_DELAY_MS, BASE_DELAY_MS * 2 ** attempt);
  return ceiling / 2 + (Math.random() * ceiling) / 2;
}

/** Wait `ms`, or reject with the signal's reason when it aborts first. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
