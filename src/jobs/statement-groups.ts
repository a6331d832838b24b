import type { Db } from '../db/database.js';
import { isInputError } from '../db/errors.js';
import { type AckedJob, type AckItem, ackBriefEach, ackEach, alreadyAcked } from './ack.js';
import { type AckAndClaimItem, type AckAndClaimOutcome, ackAndClaimEach } from './claim/ack-and-claim.js';
import { claimForGroup } from './claim/claim.js';
import type { ClaimFloors } from './claim/floors.js';
import type { Claimant, ClaimOutcome, ClaimRequest } from './claim/types.js';
import { type EnqueueItem, type EnqueueOptions, type EnqueueResult, enqueueJobs } from './enqueue/enqueue.js';
import { GroupCommit, KeyedGroupCommit } from './group-commit.js';
import type { JobRow } from './job-row.js';
import { type LeaseOutcome, outcomesOf } from './lease-outcome.js';
import { MAX_BATCH } from './limits.js';

/**
 * The hot statements of one replica, grouped (see group-commit.ts): while a claim (or an enqueue)
 * for a queue runs, further ones for that queue wait and then go together as one statement, up to
 * MAX_BATCH jobs; acks likewise, across queues.
 *
 * One statement at a time per queue and replica measured best for claims, against two or four at a time
 * (docs/adr/0007-group-commit.md; docs/benchmarks.md, "What was tried and what it gave", row "Group
 * commit"): concurrent claimers on one queue mostly skip past each other's locked rows, so running them
 * side by side buys little and costs much.
 */
export class ClaimGroups {
  private readonly groups: KeyedGroupCommit<Claimant, ClaimOutcome>;

  /** @param floors where claims start while readers pin the ready index (claim/floors.ts) */
  constructor(db: Db, defaultLeaseMs: number, floors?: ClaimFloors) {
    this.groups = new KeyedGroupCommit(
      (queue) =>
        new GroupCommit(
          (claimants) => claimForGroup(db, queue, defaultLeaseMs, claimants, floors),
          (claimant) => claimant.maxJobs,
          MAX_BATCH,
          isInputError,
        ),
    );
  }

  /** The claimant's jobs, and whether a limit held some back (queues under flow control). */
  claim(opts: ClaimRequest): Promise<ClaimOutcome> {
    return this.groups.submit(opts.queue, opts);
  }
}

/** Enqueues grouped per queue: the items of concurrent requests go in one INSERT, one commit. */
export class EnqueueGroups {
  private readonly groups: KeyedGroupCommit<EnqueueItem[], EnqueueResult[]>;

  constructor(db: Db, opts: EnqueueOptions) {
    this.groups = new KeyedGroupCommit((queue) =>
      GroupCommit.ofLists(
        (items: EnqueueItem[]) => enqueueJobs(db, queue, items, opts),
        MAX_BATCH,
        isInputError,
      ),
    );
  }

  enqueue(queue: string, items: EnqueueItem[]): Promise<EnqueueResult[]> {
    return this.groups.submit(queue, items);
  }
}

/**
 * Acks, grouped (whatever their queue): concurrent single acks share one statement, and so do
 * concurrent batch acks (ack.ts). Each item is answered by its own id and lease token; a repeated
 * ack of a lease that already completed its job (its answer was lost) is the same ack, answered done.
 */
export class AckGroups {
  private readonly single: GroupCommit<AckItem, JobRow | undefined>;
  private readonly batches: GroupCommit<AckItem[], (AckedJob | undefined)[]>;

  constructor(private readonly db: Db) {
    this.single = new GroupCommit(
      (items) => ackEach(db, items),
      () => 1,
      MAX_BATCH,
      isInputError,
    );
    this.batches = GroupCommit.ofLists(
      (items: AckItem[]) => ackBriefEach(db, items),
      MAX_BATCH,
      isInputError,
    );
  }

  /** Ack one job: done with the completed job, or why not (lease_lost, not_found). */
  async ack(item: AckItem): Promise<LeaseOutcome<JobRow>> {
    const job = (await this.single.submit(item)) ?? (await alreadyAcked(this.db, [item])).get(item.id);
    return (await outcomesOf(this.db, [item], new Map(job ? [[item.id, job]] : [])))[0]!;
  }

  /** Ack a batch: per item, done with what the metrics need, or why not. */
  async ackBatch(items: AckItem[]): Promise<LeaseOutcome<AckedJob>[]> {
    const answers = await this.batches.submit(items);
    const done = new Map<string, AckedJob>(answers.flatMap((a) => (a ? [[a.id, a] as const] : [])));
    const missed = items.filter((i) => !done.has(i.id));
    for (const [id, job] of await alreadyAcked(this.db, missed)) done.set(id, job);
    return outcomesOf(this.db, items, done);
  }
}

/**
 * Single acks that carry `next` (ack-and-claim.ts), grouped like the other acks, whatever their
 * queues: one statement acks them all and claims each one's next jobs. Weighed by the jobs it may
 * claim, so a group stays within MAX_BATCH jobs.
 */
export class AckAndClaimGroups {
  private readonly group: GroupCommit<AckAndClaimItem, AckAndClaimOutcome>;

  constructor(db: Db, defaultLeaseMs: number) {
    this.group = new GroupCommit(
      (items) => ackAndClaimEach(db, defaultLeaseMs, items),
      (item) => item.next.maxJobs,
      MAX_BATCH,
      isInputError,
    );
  }

  ackAndClaim(item: AckAndClaimItem): Promise<AckAndClaimOutcome> {
    return this.group.submit(item);
  }
}
