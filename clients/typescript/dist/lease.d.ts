import type { Http } from './http.js';
import { type Logger } from './logging.js';
import type { ClaimedJob } from './types.js';
/** What Baton keeps of a progress report: its JSON, up to this many bytes. */
export declare const PROGRESS_MAX_BYTES = 4096;
/** A claimed job while this worker holds it. */
export declare class Lease {
    readonly job: ClaimedJob;
    readonly leaseMs: number;
    /** running: its handler runs; settling: the handler is done and its ack or nack is on its way. */
    state: 'running' | 'settling' | 'lost' | 'given_back';
    /** Made when the handler first reads its signal: most handlers never do, and a busy worker makes one per job. */
    private controller;
    private abortedFor;
    /** Local time the lease was last set (claim or renewal answered): it lasts leaseMs from about then. */
    renewedAt: number;
    /** The latest progress report (a copy of its JSON), and its number. */
    progress: {
        value: unknown;
        version: number;
    } | undefined;
    /** The number of the latest report a renewal delivered. */
    sentVersion: number;
    constructor(job: ClaimedJob, leaseMs: number, claimedAt: number);
    /** The handler's signal: aborted once the lease is lost or given back. */
    get signal(): AbortSignal;
    /** Tell the handler to stop, with why. */
    abort(reason: Error): void;
    /** When the lease runs out, as far as this worker knows (local clock). */
    get expiresAt(): number;
}
/**
 * The worker's one renewal loop: every held lease renewed in one batch request, each about every
 * third of its length (those due within half a period go together), a progress report brought
 * forward to within a second. A lease is released (no longer renewed) before its job is acked, and
 * the release waits for a renewal request that carries it, so Baton never sees a renewal after an ack.
 */
export declare class Renewals {
    private readonly http;
    private readonly log;
    /** Told when Baton says a lease is gone (lease_lost, not_found, deadline_exceeded). */
    private readonly onLost;
    private readonly held;
    private readonly period;
    private timer;
    private dueAt;
    /** The renewal request on its way, and the ids it carries. */
    private inFlight;
    /** Closed when the worker has drained: a renewal still on its way then schedules no other. */
    private closed;
    constructor(http: Http, leaseMs: number, log: Logger, 
    /** Told when Baton says a lease is gone (lease_lost, not_found, deadline_exceeded). */
    onLost: (lease: Lease, outcome: string) => void);
    add(lease: Lease): void;
    /** A handler reported progress: renew (and deliver it) within a second. */
    progressed(): void;
    /** Stop renewing the lease; resolves once no renewal request carrying it is on its way. */
    release(lease: Lease): Promise<void>;
    close(): void;
    private schedule;
    private tick;
    /** Renew these leases; false when a request failed (they are tried again soon). */
    private renew;
}
