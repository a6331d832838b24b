import { describeError } from './logging.js';
/** What Baton keeps of a progress report: its JSON, up to this many bytes. */
export const PROGRESS_MAX_BYTES = 4096;
/** A progress report brings the next renewal forward to within this long. */
const PROGRESS_DELAY_MS = 1000;
const MAX_RENEWALS_PER_REQUEST = 1000;
/** A claimed job while this worker holds it. */
export class Lease {
    job;
    leaseMs;
    /** running: its handler runs; settling: the handler is done and its ack or nack is on its way. */
    state = 'running';
    /** Made when the handler first reads its signal: most handlers never do, and a busy worker makes one per job. */
    controller;
    abortedFor;
    /** Local time the lease was last set (claim or renewal answered): it lasts leaseMs from about then. */
    renewedAt;
    /** The latest progress report (a copy of its JSON), and its number. */
    progress;
    /** The number of the latest report a renewal delivered. */
    sentVersion = 0;
    constructor(job, leaseMs, claimedAt) {
        this.job = job;
        this.leaseMs = leaseMs;
        this.renewedAt = claimedAt;
    }
    /** The handler's signal: aborted once the lease is lost or given back. */
    get signal() {
        this.controller ??= new AbortController();
        if (this.abortedFor !== undefined && !this.controller.signal.aborted)
            this.controller.abort(this.abortedFor);
        return this.controller.signal;
    }
    /** Tell the handler to stop, with why. */
    abort(reason) {
        this.abortedFor ??= reason;
        this.controller?.abort(reason);
    }
    /** When the lease runs out, as far as this worker knows (local clock). */
    get expiresAt() {
        return this.renewedAt + this.leaseMs;
    }
}
/**
 * The worker's one renewal loop: every held lease renewed in one batch request, each about every
 * third of its length (those due within half a period go together), a progress report brought
 * forward to within a second. A lease is released (no longer renewed) before its job is acked, and
 * the release waits for a renewal request that carries it, so Baton never sees a renewal after an ack.
 */
export class Renewals {
    http;
    log;
    onLost;
    held = new Map();
    period;
    timer;
    dueAt = Number.POSITIVE_INFINITY;
    /** The renewal request on its way, and the ids it carries. */
    inFlight;
    /** Closed when the worker has drained: a renewal still on its way then schedules no other. */
    closed = false;
    constructor(http, leaseMs, log, 
    /** Told when Baton says a lease is gone (lease_lost, not_found, deadline_exceeded). */
    onLost) {
        this.http = http;
        this.log = log;
        this.onLost = onLost;
        this.period = Math.max(100, Math.floor(leaseMs / 3));
    }
    add(lease) {
        this.held.set(lease.job.id, lease);
        this.schedule(lease.renewedAt + this.period);
    }
    /** A handler reported progress: renew (and deliver it) within a second. */
    progressed() {
        this.schedule(Date.now() + Math.min(PROGRESS_DELAY_MS, this.period));
    }
    /** Stop renewing the lease; resolves once no renewal request carrying it is on its way. */
    async release(lease) {
        this.held.delete(lease.job.id);
        const inFlight = this.inFlight;
        if (inFlight?.ids.has(lease.job.id))
            await inFlight.done;
    }
    close() {
        this.closed = true;
        clearTimeout(this.timer);
        this.timer = undefined;
    }
    schedule(at) {
        if (this.closed || (this.timer && this.dueAt <= at))
            return;
        clearTimeout(this.timer);
        this.dueAt = at;
        this.timer = setTimeout(() => void this.tick(), Math.max(0, at - Date.now()));
    }
    async tick() {
        this.timer = undefined;
        this.dueAt = Number.POSITIVE_INFINITY;
        // One request at a time: a tick due meanwhile runs when it is answered.
        if (this.inFlight) {
            await this.inFlight.done;
            if (this.timer)
                return;
        }
        const now = Date.now();
        const due = [...this.held.values()].filter((lease) => now - lease.renewedAt >= this.period / 2 || (lease.progress?.version ?? 0) > lease.sentVersion);
        let retrySoon = false;
        if (due.length) {
            const done = this.renew(due).then((ok) => {
                retrySoon = !ok;
            });
            this.inFlight = { ids: new Set(due.map((lease) => lease.job.id)), done };
            await done;
            this.inFlight = undefined;
        }
        if (this.held.size === 0)
            return;
        const next = Math.min(...[...this.held.values()].map((lease) => lease.renewedAt + this.period));
        const pending = [...this.held.values()].some((lease) => (lease.progress?.version ?? 0) > lease.sentVersion);
        const soon = Date.now() + Math.min(PROGRESS_DELAY_MS, this.period);
        this.schedule(retrySoon || pending ? Math.min(next, soon) : Math.max(next, Date.now() + 50));
    }
    /** Renew these leases; false when a request failed (they are tried again soon). */
    async renew(leases) {
        let ok = true;
        for (let at = 0; at < leases.length; at += MAX_RENEWALS_PER_REQUEST) {
            const chunk = leases.slice(at, at + MAX_RENEWALS_PER_REQUEST);
            const sentAt = Date.now();
            const versions = chunk.map((lease) => lease.progress?.version ?? 0);
            const renewals = chunk.map((lease) => ({
                id: lease.job.id,
                lease_token: lease.job.lease_token,
                ...(lease.progress && lease.progress.version > lease.sentVersion
                    ? { progress: lease.progress.value }
                    : {}),
            }));
            try {
                const answer = await this.http.request({
                    method: 'POST',
                    path: '/v1/jobs/renew',
                    body: { renewals },
                    // Worth retrying while any of these leases may still stand.
                    retryUntil: Math.max(...chunk.map((lease) => lease.expiresAt)),
                });
                answer.results.forEach((result, i) => {
                    const lease = chunk[i];
                    if (result.outcome === 'renewed') {
                        lease.renewedAt = sentAt;
                        lease.sentVersion = Math.max(lease.sentVersion, versions[i]);
                    }
                    else {
                        // Gone for good: renewing it again would only be told so again, every third of a lease.
                        this.held.delete(lease.job.id);
                        this.onLost(lease, result.outcome);
                    }
                });
            }
            catch (err) {
                ok = false;
                this.log('warn', 'renew_failed', { jobs: chunk.length, error: describeError(err) });
            }
        }
        return ok;
    }
}
