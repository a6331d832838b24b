import { faultFields, isUnavailableError, logFieldsOf } from '../db/errors.js';
import { readBackOnLostConnection } from '../db/lost-connection.js';
import type { AckedJob, AckItem } from '../jobs/ack.js';
import { cancelJob } from '../jobs/cancel.js';
import type { ClaimedRow } from '../jobs/claim/types.js';
import type { JobRow } from '../jobs/job-row.js';
import { listLeaseHolders } from '../jobs/lease-holders.js';
import { type LeaseOutcome, queueOfBatch } from '../jobs/lease-outcome.js';
import { type NackInput, type NackResult, nackJob, nackReceipt } from '../jobs/nack.js';
import { type RenewItem, type RenewOutcome, renewLeases } from '../jobs/renew.js';
import { AckAndClaimGroups, AckGroups } from '../jobs/statement-groups.js';
import { type TraceContext, traceOf } from '../jobs/trace-context.js';
import { distinctTraces, messagingAttributes, recorded, type SpanStart } from '../tracing/tracing.js';
import type { ClaimCall, JobUseCases, ServiceDeps } from './jobs.js';

/** The next jobs an ack or nack asks for (`next`): a claim of the acked job's queue. */
export type NextClaim = Omit<ClaimCall, 'queue'>;

/** A write's outcome, and the jobs claimed for `next` (empty without next, or when nothing was claimed). */
export interface WithNext<T> {
  outcome: T;
  next: ClaimedRow[];
}

/** A batch item the caller may not see (a queue-limited key's other queues): left out, answered so. */
type Hidden = { outcome: 'not_found' };

/**
 * What a worker does with its lease: renew, ack, nack (each with `next`, the claim of its queue's
 * next jobs in the same call), and an operator's cancel. Every write is guarded by the lease token
 * (jobs/), counted in the metrics, and wakes what it frees: an ack or a nack to dead frees a slot of
 * a limited queue (slotsFreed), a nack retried at once makes a job ready (jobsReady), and a job that
 * finishes (ack, nack to dead, cancel) wakes the requests awaiting it (jobsFinished).
 *
 * `scope`, for a key limited to queue patterns, maps each job the key may see to its queue
 * (plugins/auth.ts): items outside it are left out of the write and answered not_found.
 */
export class LeaseUseCases {
  private readonly acks: AckGroups;
  private readonly acksAndClaims: AckAndClaimGroups;

  constructor(
    private readonly deps: ServiceDeps,
    private readonly jobs: JobUseCases,
  ) {
    this.acks = new AckGroups(deps.db);
    this.acksAndClaims = new AckAndClaimGroups(deps.db, deps.config.defaultLeaseMs);
  }

  /**
   * Ack one job. With `next`, the ack and the claim of its queue's next jobs go in one statement
   * where they can (jobs/ack-and-claim.ts); when that statement did not ack the job (a lost lease, a
   * repeated ack, a job carried to another slot) or failed, being atomic it did nothing, and the ack
   * path and then the claim path run instead. The ack stands whatever happens to the claim.
   */
  ack(item: AckItem, next?: NextClaim, trace?: TraceContext): Promise<WithNext<LeaseOutcome<JobRow>>> {
    return recorded(
      this.deps.tracing,
      () => this.ackOne(item, next),
      (out) => settleSpan('ack', item.id, trace, out, (job) => job),
    );
  }

  private async ackOne(item: AckItem, next?: NextClaim): Promise<WithNext<LeaseOutcome<JobRow>>> {
    const both = next ? await this.ackAndClaimOnce(item, next) : undefined;
    const outcome: LeaseOutcome<JobRow> = both?.job
      ? { outcome: 'done', value: both.job }
      : await this.jobs.again('ack', () => this.acks.ack(item));
    if (outcome.outcome !== 'done') return { outcome: this.lost(outcome, 'ack'), next: [] };
    const job = outcome.value;
    this.acked([job]);
    if (!next) return { outcome, next: [] };
    const claimed = both?.next.length
      ? await this.jobs.handOut({ ...next, queue: job.queue }, both.next)
      : await this.claimNext(job.queue, next);
    return { outcome, next: claimed };
  }

  /**
   * Ack a batch, each item on its own (acked, lease_lost or not_found, in request order). With
   * `next`, every acked job must be of one queue, checked before anything is acked (a 400 naming the
   * first item of another); no next jobs are claimed when an item's lease was lost or none was acked.
   */
  ackBatch(
    items: AckItem[],
    opts: {
      scope?: ReadonlyMap<string, string>;
      next?: NextClaim;
      field?: string;
      trace?: TraceContext;
    } = {},
  ): Promise<WithNext<(LeaseOutcome<AckedJob> | Hidden)[]>> {
    return recorded(
      this.deps.tracing,
      () => this.ackMany(items, opts),
      (out) => {
        const queues = new Set(out?.outcome.flatMap((o) => (o.outcome === 'done' ? [o.value.queue] : [])));
        const queue = queues.size === 1 ? [...queues][0] : undefined;
        return {
          name: queue ? `ack ${queue}` : 'ack',
          kind: 'consumer',
          parent: opts.trace,
          links: distinctTraces((out?.next ?? []).map((row) => traceOf(row.meta))),
          attributes: {
            ...messagingAttributes('ack', 'settle', queue),
            'messaging.batch.message_count': items.length,
            'baton.acked': out?.outcome.filter((o) => o.outcome === 'done').length ?? 0,
          },
        };
      },
    );
  }

  private async ackMany(
    items: AckItem[],
    opts: { scope?: ReadonlyMap<string, string>; next?: NextClaim; field?: string },
  ): Promise<WithNext<(LeaseOutcome<AckedJob> | Hidden)[]>> {
    const { scope, next } = opts;
    const nextQueue = next
      ? await this.jobs.again('read the queue of a batch', () =>
          queueOfBatch(
            this.deps.db,
            opts.field ?? 'acks',
            items.map((item) => item.id),
            scope,
          ),
        )
      : undefined;
    const outcomes = await this.visibleOnly(items, scope, 'ack', (visible) =>
      this.jobs.again('ack a batch', () => this.acks.ackBatch(visible)),
    );
    const done = outcomes.flatMap((out) => (out.outcome === 'done' ? [out.value] : []));
    this.acked(done);
    const claim =
      next !== undefined &&
      nextQueue !== undefined &&
      done.length > 0 &&
      !outcomes.some((out) => out.outcome === 'lease_lost');
    return { outcome: outcomes, next: claim ? await this.claimNext(nextQueue, next) : [] };
  }

  /**
   * Nack: this attempt failed. The job is retried (at once: ready, waking claims; later: scheduled)
   * or goes dead (freeing its slot); or it is given back uncounted (ready, waking claims). With
   * `next`, then claims its queue's next jobs.
   */
  nack(
    input: NackInput,
    next?: NextClaim,
    trace?: TraceContext,
  ): Promise<WithNext<LeaseOutcome<NackResult>>> {
    return recorded(
      this.deps.tracing,
      () => this.nackOne(input, next),
      (out) => settleSpan('nack', input.id, trace, out, (result) => result.job),
    );
  }

  private async nackOne(input: NackInput, next?: NextClaim): Promise<WithNext<LeaseOutcome<NackResult>>> {
    // A nack whose connection was lost is run again only once its receipt says it did not commit.
    const outcome = await readBackOnLostConnection(
      this.deps.log,
      'nack',
      () => nackJob(this.deps.db, input, this.deps.config),
      async (): Promise<LeaseOutcome<NackResult> | undefined> => {
        const value = await nackReceipt(this.deps.db, input);
        return value && { outcome: 'done', value };
      },
    );
    if (outcome.outcome !== 'done') return { outcome: this.lost(outcome, 'nack'), next: [] };
    const { job, readyNow } = outcome.value;
    this.deps.metrics.nacked(
      job.queue,
      job.state === 'dead' ? 'dead' : input.giveBack ? 'given_back' : 'retry',
    );
    if (job.state === 'dead') this.deps.notifier.jobsFinished([job]);
    if (readyNow) this.deps.notifier.jobsReady(job.queue, 1);
    else this.deps.notifier.slotsFreed(job.queue, 1);
    return { outcome, next: next ? await this.claimNext(job.queue, next) : [] };
  }

  /**
   * Renew leases, each on its own (renewed, deadline_exceeded, lease_lost or not_found). Acks and
   * renewals are matched by lease token, so each is run again once if its connection was lost
   * (JobUseCases.again): a second run finds what a first one that committed unanswered did. A nack
   * reads its receipt back first (nack above): run again alone, one that committed unanswered would be
   * answered lease_lost.
   */
  async renew(items: RenewItem[], scope?: ReadonlyMap<string, string>): Promise<(RenewOutcome | Hidden)[]> {
    const outcomes = await this.visibleOnly(items, scope, 'renew', (visible) =>
      this.jobs.again('renew', () => renewLeases(this.deps.db, visible)),
    );
    for (const out of outcomes) if (out.outcome === 'done') this.deps.metrics.renewed(out.value.queue);
    return outcomes;
  }

  /**
   * Cancel a job that has not finished; a claimed job's worker finds out on its next write (lease
   * lost). Cancelling a cancelled job answers it again, uncounted.
   */
  async cancel(id: string, queue?: string): Promise<JobRow> {
    return (await this.cancelTelling(id, queue)).job;
  }

  /** cancel(), telling whether the job was cancelled already (by someone else, or an earlier try). */
  async cancelTelling(id: string, queue?: string): Promise<{ job: JobRow; already: boolean }> {
    // Run again if its connection was lost: a cancel of a cancelled job answers it again. A second
    // run that finds the job cancelled is taken to find the first run's work (the first lost its
    // connection while it ran), so the cancel is counted and its waiters told, once.
    let runs = 0;
    const { job, already: found } = await this.jobs.again('cancel', () => {
      runs++;
      return cancelJob(this.deps.db, id, queue);
    });
    const already = found && runs === 1;
    if (!already) {
      this.deps.metrics.cancelled(job.queue, 1);
      this.deps.notifier.slotsFreed(job.queue, 1);
      this.deps.notifier.jobsFinished([job]);
    }
    return { job, already };
  }

  /** Acked jobs: counted, each frees its slot of a limited queue, and their awaiters are told. */
  private acked(jobs: AckedJob[]): void {
    if (jobs.length === 0) return;
    this.deps.metrics.acked(jobs);
    for (const job of jobs) this.deps.notifier.slotsFreed(job.queue, 1);
    this.deps.notifier.jobsFinished(jobs);
  }

  /** A lease write that missed: a lost lease is counted (a stale or confused worker). */
  private lost<T>(outcome: LeaseOutcome<T>, operation: 'ack' | 'nack' | 'renew'): LeaseOutcome<T> {
    if (outcome.outcome === 'lease_lost') this.deps.metrics.leaseLost(outcome.queue, operation);
    return outcome;
  }

  /** A batch's outcomes by item, in request order: items outside `scope` are not written at all. */
  private async visibleOnly<I extends { id: string }, O extends LeaseOutcome<unknown> | RenewOutcome>(
    items: I[],
    scope: ReadonlyMap<string, string> | undefined,
    operation: 'ack' | 'renew',
    write: (visible: I[]) => Promise<O[]>,
  ): Promise<(O | Hidden)[]> {
    const visible = scope ? items.filter((item) => scope.has(item.id)) : items;
    const outcomes = await write(visible);
    const byId = new Map<string, O>(visible.map((item, i) => [item.id, outcomes[i]!]));
    for (const out of byId.values()) {
      if (out.outcome === 'lease_lost') this.deps.metrics.leaseLost(out.queue, operation);
    }
    return items.map((item) => byId.get(item.id) ?? { outcome: 'not_found' as const });
  }

  /** The ack and the claim of `next` in one statement; undefined when it did not ack (see ack()). */
  private async ackAndClaimOnce(item: AckItem, next: NextClaim) {
    try {
      const out = await this.acksAndClaims.ackAndClaim({ ...item, next });
      return out.job ? out : undefined;
    } catch (err) {
      // Atomic, so nothing of it happened; the ack path runs it again (and retries a lost connection).
      next.log.warn(logFieldsOf(err), 'ack-and-claim in one statement failed; acking, then claiming');
      return undefined;
    }
  }

  /**
   * After an ack or nack has committed, the claim of `next` through the claim's own path. It stands
   * whatever happens here: a claim that fails is logged and answered as no jobs, so the worker learns
   * its write went through and claims again.
   */
  private async claimNext(queue: string, next: NextClaim): Promise<ClaimedRow[]> {
    try {
      return await this.jobs.claim({ ...next, queue });
    } catch (err) {
      // An outage (the claim was already run again once if its connection was lost) is expected: one
      // line. Anything else is a bug, with its stack.
      if (isUnavailableError(err)) {
        next.log.warn({ ...faultFields(err), queue }, 'the ack is committed; the claim of next jobs failed');
      } else {
        next.log.error({ err, queue }, 'the ack is committed; the claim of next jobs failed');
      }
      return [];
    }
  }

  /** Who holds leases now (the dashboard's Workers page): from the jobs in flight. */
  holders(opts: { queue?: string; patterns?: string[]; limit: number }) {
    return listLeaseHolders(this.deps.db, opts);
  }
}

/**
 * The span of one ack or nack, recorded once it is answered: it continues the request's trace, or
 * else the job's own (the one its worker was handed), and links the next jobs it claimed.
 */
function settleSpan<T>(
  operation: 'ack' | 'nack',
  id: string,
  trace: TraceContext | undefined,
  out: WithNext<LeaseOutcome<T>> | undefined,
  jobOf: (value: T) => Pick<JobRow, 'queue' | 'meta' | 'state'>,
): SpanStart & { name: string } {
  const job = out?.outcome.outcome === 'done' ? jobOf(out.outcome.value) : undefined;
  const queue = job?.queue ?? (out?.outcome.outcome === 'lease_lost' ? out.outcome.queue : undefined);
  return {
    name: queue ? `${operation} ${queue}` : operation,
    kind: 'consumer',
    parent: trace ?? traceOf(job?.meta),
    links: distinctTraces((out?.next ?? []).map((row) => traceOf(row.meta))),
    attributes: {
      ...messagingAttributes(operation, 'settle', queue),
      'messaging.message.id': id,
      ...(out ? { 'baton.outcome': out.outcome.outcome } : {}),
      ...(job ? { 'baton.job.state': job.state } : {}),
    },
  };
}
