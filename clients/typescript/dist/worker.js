import os from 'node:os';
import { BatonError, PermanentFailure, RetryLater } from './errors.js';
import { Http, VERSION } from './http.js';
import { Lease, PROGRESS_MAX_BYTES, Renewals } from './lease.js';
import { describeError } from './logging.js';
/**
 * Runs a handler over the jobs of a queue: claims as many jobs as it has free slots (long-polling),
 * renews their leases, acks with the handler's result or nacks with its error (each ack or nack
 * claiming the job that takes its place), and on stop drains and gives back what is left.
 */
export class Worker {
    workerId;
    http;
    log;
    queue;
    handler;
    concurrency;
    leaseMs;
    waitMs;
    drainMs;
    handleSignals;
    renewals;
    /** Every job held, by id, from its claim until it is acked, nacked, given back or lost. */
    leases = new Map();
    /** One per slot: a job, then the job its ack claimed in its place, and so on. */
    slots = new Set();
    /** Acks, nacks and give-backs on their way: a stopping worker waits for them. */
    settling = new Set();
    claiming = new AbortController();
    stopping = false;
    wake = () => { };
    endDrain = () => { };
    running;
    heartbeat;
    counts = { acked: 0, nacked: 0, gave_back: 0, lost: 0 };
    constructor(options) {
        this.http = new Http(options);
        this.log = this.http.logger;
        this.queue = options.queue;
        this.handler = options.handler;
        this.concurrency = options.concurrency ?? 10;
        this.leaseMs = options.leaseMs ?? 30_000;
        this.waitMs = options.waitMs ?? 20_000;
        this.drainMs = options.drainMs ?? 25_000;
        this.handleSignals = options.handleSignals ?? true;
        this.workerId = (options.workerId ?? `${os.hostname()}-${process.pid}`).slice(0, 128);
        if (!Number.isInteger(this.concurrency) || this.concurrency < 1 || this.concurrency > 1000)
            throw new RangeError('concurrency is a whole number from 1 to 1000');
        this.renewals = new Renewals(this.http, this.leaseMs, this.log, (lease, outcome) => this.lost(lease, outcome));
    }
    /**
     * Work the queue until stop() (or SIGTERM/SIGINT): resolves once drained. Rejects when Baton
     * refuses the claims themselves (a bad key, a bad setting), after draining what it holds.
     */
    run() {
        this.running ??= this.work();
        return this.running;
    }
    /**
     * Stop claiming at once, let running handlers finish for up to drainMs, then give back the rest
     * (ready again at once, the attempt not counted) and abort their handlers. Resolves when run() does.
     */
    stop() {
        if (!this.stopping) {
            this.stopping = true;
            this.log('info', 'stopping', { worker_id: this.workerId, running: this.leases.size });
            this.claiming.abort(new Error('the worker is stopping'));
            this.wake();
        }
        return this.running?.catch(() => { }) ?? Promise.resolve();
    }
    async work() {
        const onSignal = (signal) => {
            if (this.stopping)
                return this.endDrain();
            this.log('info', 'signal', { signal });
            void this.stop();
        };
        if (this.handleSignals) {
            process.on('SIGTERM', onSignal);
            process.on('SIGINT', onSignal);
        }
        this.log('info', 'started', {
            worker_id: this.workerId,
            queue: this.queue,
            url: this.http.url,
            concurrency: this.concurrency,
            lease_ms: this.leaseMs,
        });
        this.announce();
        let failure;
        try {
            await this.claimLoop();
        }
        catch (err) {
            failure = err;
            this.log('error', 'claim_failed', { error: describeError(err) });
            void this.stop();
        }
        try {
            await this.drain();
        }
        finally {
            await this.sayGoodbye();
            this.renewals.close();
            this.http.close();
            if (this.handleSignals) {
                process.off('SIGTERM', onSignal);
                process.off('SIGINT', onSignal);
            }
        }
        this.log('info', 'drained', { worker_id: this.workerId, ...this.counts });
        if (failure)
            throw failure;
    }
    /**
     * Tell Baton who this worker is (PUT /v1/workers/{id}: the dashboard's Workers page lists it idle or
     * busy), and again every third of the silence Baton allows. Best effort: a failure, or a Baton
     * without the route, changes nothing of the work.
     */
    announce() {
        if (this.stopping)
            return;
        const body = {
            queues: [this.queue],
            host: os.hostname().slice(0, 255),
            pid: process.pid,
            concurrency: this.concurrency,
            version: `baton-client-ts/${VERSION}`,
        };
        this.http
            .request({
            method: 'PUT',
            path: `/v1/workers/${encodeURIComponent(this.workerId)}`,
            body,
            signal: this.claiming.signal,
        })
            .then((answer) => this.beatIn(Math.max(1_000, Math.floor((answer.silence_ms ?? 60_000) / 3))), (err) => {
            if (this.stopping)
                return;
            if (!(err instanceof BatonError && err.status === 404)) {
                this.log('warn', 'announce_failed', { error: describeError(err) });
            }
            this.beatIn(20_000);
        });
    }
    beatIn(ms) {
        if (this.stopping)
            return;
        this.heartbeat = setTimeout(() => this.announce(), ms);
        this.heartbeat.unref();
    }
    /** The worker is stopping: it is no longer listed. Best effort, and brief. */
    async sayGoodbye() {
        clearTimeout(this.heartbeat);
        await this.http
            .request({
            method: 'DELETE',
            path: `/v1/workers/${encodeURIComponent(this.workerId)}`,
            retry: 'unsent',
            retryUntil: Date.now() + 2_000,
        })
            .catch(() => { });
    }
    async claimLoop() {
        while (!this.stopping) {
            const free = this.concurrency - this.slots.size;
            if (free <= 0) {
                await new Promise((resolve) => {
                    this.wake = resolve;
                });
                continue;
            }
            let jobs;
            try {
                const answer = await this.http.request({
                    method: 'POST',
                    path: `/v1/queues/${encodeURIComponent(this.queue)}/claim`,
                    body: { max_jobs: free, lease_ms: this.leaseMs, wait_ms: this.waitMs, worker_id: this.workerId },
                    holdMs: this.waitMs,
                    signal: this.claiming.signal,
                    retryUntil: Number.POSITIVE_INFINITY,
                });
                jobs = answer.jobs;
            }
            catch (err) {
                // Stopping abandons the long-poll: Baton hands back whatever it claimed for it.
                if (this.stopping)
                    return;
                throw err;
            }
            for (const job of jobs)
                this.start(job, 'claim');
        }
    }
    /** Take a job in hand: run it in a slot of its own, or give it back when stopping. */
    start(job, by) {
        const lease = new Lease(job, this.leaseMs, Date.now());
        this.leases.set(job.id, lease);
        this.log('debug', 'claimed', { id: job.id, attempt: job.attempt, by });
        if (this.stopping) {
            this.track(this.giveBack(lease));
            return;
        }
        this.renewals.add(lease);
        const slot = this.slot(lease).finally(() => {
            this.slots.delete(slot);
            this.wake();
        });
        this.slots.add(slot);
    }
    async slot(first) {
        let lease = first;
        while (lease) {
            const next = await this.execute(lease);
            lease = undefined;
            for (const job of next) {
                const following = new Lease(job, this.leaseMs, Date.now());
                this.leases.set(job.id, following);
                this.log('debug', 'claimed', { id: job.id, attempt: job.attempt, by: 'ack' });
                if (this.stopping)
                    this.track(this.giveBack(following));
                else if (!lease) {
                    this.renewals.add(following);
                    lease = following;
                }
                else {
                    // next asks for one job; should Baton hand out more, each gets a slot of its own.
                    this.leases.delete(job.id);
                    this.start(job, 'ack');
                }
            }
        }
    }
    /** Run one job's handler, then ack or nack it; answers the jobs the ack or nack claimed. */
    async execute(lease) {
        const context = {
            get signal() {
                return lease.signal;
            },
            progress: (value) => this.progress(lease, value),
        };
        let outcome;
        try {
            outcome = { ok: true, result: await this.handler(lease.job, context) };
        }
        catch (error) {
            outcome = { ok: false, error };
        }
        if (lease.state !== 'running') {
            // Lost or given back: someone else may run the job; what this run made of it is dropped.
            this.log('warn', 'dropped', {
                id: lease.job.id,
                reason: lease.state,
                outcome: outcome.ok ? 'returned' : 'threw',
            });
            this.leases.delete(lease.job.id);
            return [];
        }
        lease.state = 'settling';
        const settled = this.settle(lease, outcome);
        this.track(settled);
        return settled;
    }
    async settle(lease, outcome) {
        try {
            await this.renewals.release(lease);
            if (lease.state !== 'settling') {
                this.log('warn', 'dropped', {
                    id: lease.job.id,
                    reason: lease.state,
                    outcome: outcome.ok ? 'returned' : 'threw',
                });
                return [];
            }
            if (outcome.ok)
                return await this.ack(lease, outcome.result);
            return await this.nack(lease, outcome.error);
        }
        finally {
            this.leases.delete(lease.job.id);
        }
    }
    /** `next` for an ack or nack: the job that takes this one's place, unless stopping. */
    next() {
        if (this.stopping)
            return {};
        return { next: { max_jobs: 1, lease_ms: this.leaseMs, wait_ms: 0, worker_id: this.workerId } };
    }
    async ack(lease, result) {
        const { job } = lease;
        const answerLost = { value: false };
        try {
            const answer = await this.http.request({
                method: 'POST',
                path: `/v1/jobs/${job.id}/ack`,
                body: {
                    lease_token: job.lease_token,
                    result,
                    ...(lease.progress ? { progress: lease.progress.value } : {}),
                    ...this.next(),
                },
                retryUntil: lease.expiresAt,
                answerLost,
            });
            this.counts.acked++;
            this.log('debug', 'acked', { id: job.id, attempt: job.attempt });
            return answer.next ?? [];
        }
        catch (err) {
            if (err instanceof BatonError && err.code === 'lease_lost' && answerLost.value) {
                // The first try's answer was lost: it may have been the ack that took the lease.
                const now = await this.read(job.id);
                if (now?.state === 'completed' && now.attempts === job.attempt) {
                    this.counts.acked++;
                    this.log('debug', 'acked', { id: job.id, attempt: job.attempt, answer_lost: true });
                    return [];
                }
            }
            if (err instanceof BatonError &&
                (err.code === 'validation_failed' || err.code === 'payload_too_large')) {
                // Baton will not keep this result: fail the attempt with why, rather than let the lease run out.
                return this.nack(lease, new Error(`Baton refused the result: ${err.detail}`));
            }
            this.failed(lease, 'ack', err);
            return [];
        }
    }
    async nack(lease, error) {
        const { job } = lease;
        const answerLost = { value: false };
        try {
            const answer = await this.http.request({
                method: 'POST',
                path: `/v1/jobs/${job.id}/nack`,
                body: {
                    lease_token: job.lease_token,
                    ...failure(error),
                    ...(lease.progress ? { progress: lease.progress.value } : {}),
                    ...this.next(),
                },
                retryUntil: lease.expiresAt,
                answerLost,
            });
            this.counts.nacked++;
            this.log('info', 'nacked', {
                id: job.id,
                attempt: job.attempt,
                state: answer.state,
                error: describeError(error),
            });
            return answer.next ?? [];
        }
        catch (err) {
            // A retry after a lost answer: the first try was the nack, or the lease ran out; either way
            // the job is Baton's again.
            if (err instanceof BatonError && err.code === 'lease_lost' && answerLost.value) {
                this.counts.nacked++;
                this.log('info', 'nacked', { id: job.id, attempt: job.attempt, answer_lost: true });
                return [];
            }
            this.failed(lease, 'nack', err);
            return [];
        }
    }
    failed(lease, what, err) {
        if (err instanceof BatonError && (err.code === 'lease_lost' || err.code === 'not_found')) {
            this.counts.lost++;
            this.log('warn', 'lease_lost', {
                id: lease.job.id,
                attempt: lease.job.attempt,
                during: what,
                code: err.code,
            });
        }
        else
            this.log('error', `${what}_failed`, { id: lease.job.id, error: describeError(err) });
    }
    /** Hand a job back unfinished: ready again at once, this attempt not counted. */
    async giveBack(lease) {
        const { job } = lease;
        lease.state = 'given_back';
        lease.abort(new Error(`the worker is stopping: job ${job.id} was given back`));
        try {
            await this.renewals.release(lease);
            await this.http.request({
                method: 'POST',
                path: `/v1/jobs/${job.id}/nack`,
                body: { lease_token: job.lease_token, give_back: true },
                retryUntil: lease.expiresAt,
            });
            this.counts.gave_back++;
            this.log('info', 'gave_back', { id: job.id, attempt: job.attempt });
        }
        catch (err) {
            this.failed(lease, 'nack', err);
        }
        finally {
            this.leases.delete(job.id);
        }
    }
    /** Baton says the lease is gone: tell the handler, and never ack or nack the job. */
    lost(lease, outcome) {
        if (lease.state !== 'running' && lease.state !== 'settling')
            return;
        lease.state = 'lost';
        this.counts.lost++;
        this.log('warn', 'lease_lost', {
            id: lease.job.id,
            attempt: lease.job.attempt,
            during: 'renew',
            code: outcome,
        });
        lease.abort(new Error(`the lease of job ${lease.job.id} was lost (${outcome})`));
    }
    progress(lease, value) {
        const json = JSON.stringify(value ?? null);
        const bytes = new TextEncoder().encode(json).length;
        if (bytes > PROGRESS_MAX_BYTES)
            throw new RangeError(`progress is ${bytes} bytes of JSON; Baton keeps at most ${PROGRESS_MAX_BYTES}`);
        if (lease.state !== 'running')
            return;
        lease.progress = { value: JSON.parse(json), version: (lease.progress?.version ?? 0) + 1 };
        this.renewals.progressed();
    }
    /** Wait for running handlers up to drainMs, give back the jobs still running, settle the rest. */
    async drain() {
        if (this.slots.size) {
            let timer;
            await Promise.race([
                Promise.all(this.slots),
                new Promise((resolve) => {
                    this.endDrain = resolve;
                    timer = setTimeout(resolve, this.drainMs);
                }),
            ]);
            clearTimeout(timer);
            for (const lease of this.leases.values())
                if (lease.state === 'running')
                    this.track(this.giveBack(lease));
        }
        while (this.settling.size)
            await Promise.all(this.settling);
    }
    track(work) {
        const tracked = work.catch(() => { }).finally(() => this.settling.delete(tracked));
        this.settling.add(tracked);
    }
    async read(id) {
        try {
            return await this.http.request({ method: 'GET', path: `/v1/jobs/${id}` });
        }
        catch {
            return undefined;
        }
    }
}
/** The nack fields for a handler's error: the error itself, and its retry delay or permanence. */
function failure(error) {
    const err = error instanceof Error ? error : undefined;
    const message = (err ? err.message || err.name : String(error)).slice(0, 4096);
    const details = {
        type: err ? err.name : typeof error,
        ...(err?.stack ? { stack: err.stack.slice(0, 4096) } : {}),
    };
    if (error instanceof PermanentFailure)
        return { error: { message, details }, dead: true };
    const delay = error instanceof RetryLater ? error.delayMs : error?.retryInMs;
    return {
        error: { message, details },
        ...(typeof delay === 'number' && delay >= 0 ? { retry_in_ms: Math.round(delay) } : {}),
    };
}
