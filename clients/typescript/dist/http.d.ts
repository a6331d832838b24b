import { type Logger } from './logging.js';
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
    answerLost?: {
        value: boolean;
    };
}
export declare const VERSION = "0.1.0";
/**
 * Sends requests to Baton: JSON in and out, problem+json errors as BatonError, retries with backoff.
 *
 * Over node:http with a keep-alive agent, not the global fetch: fetch (undici) cost about three
 * times the client CPU per request here (bench/load/http-client.ts), and after an aborted request
 * (a stopping worker's long-poll) it opened a fresh connection that it never used, which held up
 * the server's own shutdown until its keep-alive timeout.
 */
export declare class Http {
    readonly url: string;
    readonly logger: Logger;
    private readonly apiKey;
    private readonly timeoutMs;
    private readonly maxRetries;
    private readonly base;
    private readonly agent;
    private readonly transport;
    /** What every request shares, worked out once (a busy worker sends one request per job). */
    private readonly hostname;
    private readonly port;
    private readonly prefix;
    private readonly headers;
    constructor(options?: ConnectionOptions);
    /** Close the kept-alive connections (an idle one closes on its own after Baton's keep-alive timeout). */
    close(): void;
    request<T>(call: Call): Promise<T>;
    private try;
    /** One HTTP exchange; `sent` turns true once the request has a connection to go out on. */
    private send;
    private pathOf;
}
/**
 * The wait before retry `attempt` (0-based): Retry-After when Baton sent one (plus up to a fifth more,
 * so that clients told the same do not return together), else exponential from 100 ms to 5 s with
 * jitter (half of it random).
 */
export declare function backoff(attempt: number, retryAfterMs?: number): number;
/** Wait `ms`, or reject with the signal's reason when it aborts first. */
export declare function sleep(ms: number, signal?: AbortSignal): Promise<void>;
