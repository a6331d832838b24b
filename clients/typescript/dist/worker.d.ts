import { type ConnectionOptions } from './http.js';
import type { ClaimedJob } from './types.js';
/** A claimed job as the handler sees it: id, payload, attempt, traceparent, ... */
export type WorkerJob<P = unknown> = Omit<ClaimedJob, 'payload'> & {
    payload: P;
};
/** What a handler gets besides its job. */
export interface JobContext {
    /**
     * Aborts when the handler must stop: the lease was lost (someone else may run the job now; this
     * worker will not ack it), or the worker is stopping and the drain deadline passed (the job was
     * given back). `signal.reason` says which. Pass it to fetch and the like.
     */
    signal: AbortSignal;
    /**
     * Report how far the job got (any JSON, at most 4096 bytes of it, else this throws): sent with
     * the lease's next renewal, within a second, and with the ack. Latest wins.
     */
    progress(value: unknown): void;
}
export type Handler<P = unknown> = (job: WorkerJob<P>, context: JobContext) => unknown;
export interface WorkerOptions<P = unknown> extends ConnectionOptions {
    /** The queue to work. */
    queue: string;
    /** Your work: its return value is the job's result; a throw fails the attempt. */
    handler: Handler<P>;
    /** Jobs run at once. Default 10. */
    concurrency?: number;
    /** Lease length; renewed about every third of it while the handler runs. Default 30 000 ms. */
    leaseMs?: number;
    /** How long a claim waits for a job when none is ready (long-poll; at most 20 000). Default 20 000 ms. */
    waitMs?: number;
    /** On stop, how long running handlers may take to finish before their jobs are given back. Default 25 000 ms. */
    drainMs?: number;
    /** Shown on the jobs it claims. Default: hostname-pid. */
    workerId?: string;
    /** run() stops the worker on SIGTERM and SIGINT (a second one ends the drain at once). Default true. */
    handleSignals?: boolean;
}
/**
 * Runs a handler over the jobs of a queue: claims as many jobs as it has free slots (long-polling),
 * renews their leases, acks with the handler's result or nacks with its error (each ack or nack
 * claiming the job that takes its place), and on stop drains and gives back what is left.
 */
export declare class Worker<P = unknown> {
    readonly workerId: string;
    private readonly http;
    private readonly log;
    private readonly queue;
    private readonly handler;
    private readonly concurrency;
    private readonly leaseMs;
    private readonly waitMs;
    private readonly drainMs;
    private readonly handleSignals;
    private readonly renewals;
    /** Every job held, by id, from its claim until it is acked, nacked, given back or lost. */
    private readonly leases;
    /** One per slot: a job, then the job its ack claimed in its place, and so on. */
    private readonly slots;
    /** Acks, nacks and give-backs on their way: a stopping worker waits for them. */
    private readonly settling;
    private readonly claiming;
    private stopping;
    private wake;
    private endDrain;
    private running;
    private heartbeat;
    private readonly counts;
    constructor(options: WorkerOptions<P>);
    /**
     * Work the queue until stop() (or SIGTERM/SIGINT): resolves once drained. Rejects when Baton
     * refuses the claims themselves (a bad key, a bad setting), after draining what it holds.
     */
    run(): Promise<void>;
    /**
     * Stop claiming at once, let running handlers finish for up to drainMs, then give back the rest
     * (ready again at once, the attempt not counted) and abort their handlers. Resolves when run() does.
     */
    stop(): Promise<void>;
    private work;
    /**
     * Tell Baton who this worker is (PUT /v1/workers/{id}: the dashboard's Workers page lists it idle or
     * busy), and again every third of the silence Baton allows. Best effort: a failure, or a Baton
     * without the route, changes nothing of the work.
     */
    private announce;
    private beatIn;
    /** The worker is stopping: it is no longer listed. Best effort, and brief. */
    private sayGoodbye;
    private claimLoop;
    /** Take a job in hand: run it in a slot of its own, or give it back when stopping. */
    private start;
    private slot;
    /** Run one job's handler, then ack or nack it; answers the jobs the ack or nack claimed. */
    private execute;
    private settle;
    /** `next` for an ack or nack: the job that takes this one's place, unless stopping. */
    private next;
    private ack;
    private nack;
    private failed;
    /** Hand a job back unfinished: ready again at once, this attempt not counted. */
    private giveBack;
    /** Baton says the lease is gone: tell the handler, and never ack or nack the job. */
    private lost;
    private progress;
    /** Wait for running handlers up to drainMs, give back the jobs still running, settle the rest. */
    private drain;
    private track;
    private read;
}
