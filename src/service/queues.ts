import { queueNotFound } from '../errors.js';
import type { LiveState } from '../job-states.js';
import { cancelQueueJobs, purgeQueue } from '../jobs/cancel.js';
import { deleteQueue } from '../jobs/delete-queue.js';
import { forgetIdempotencyKeys } from '../jobs/enqueue/enqueue.js';
import { type RedriveFilter, redriveDeadJobs } from '../jobs/redrive.js';
import { refreshFinishedStats, refreshLiveStats } from '../maintenance/queue-stats.js';
import {
  deleteGroupOverride,
  type GroupChanges,
  type GroupListKey,
  getGroup,
  groupsCountedAt,
  listGroups,
  putGroupOverride,
} from '../queues/group-store.js';
import { readOverview } from '../queues/overview.js';
import { readQueueHistory } from '../queues/queue-history.js';
import { checkFifoGroupLimit, checkSettings, effectiveSettings } from '../queues/queue-settings.js';
import {
  createQueueOnce,
  deadLetterRoutes,
  getQueue,
  type ListedQueueRow,
  listQueues,
  lockQueue,
  type QueueChanges,
  type QueueRow,
  type QueueStatsRow,
  setPaused,
  upsertQueue,
} from '../queues/queue-store.js';
import type { ServiceDeps } from './jobs.js';

/**
 * An operator's use cases on queues and their groups, whichever protocol asks. A change checked
 * against the queue's settings (the backoff cap against its base, an SQS FIFO queue's one job per
 * group in flight) reads the queue under a lock and writes in the same transaction, so a concurrent
 * change cannot slip between the check and the write. A change that may let claims take jobs now
 * (resuming, raising or removing a limit, redriving) wakes them.
 */
export class QueueUseCases {
  constructor(private readonly deps: ServiceDeps) {}

  /** Jobs a purge or a forced delete cancelled: requests awaiting them are told (Notifier.jobsFinished). */
  private readonly finished = (ids: string[]) => this.deps.notifier.jobsFinished(ids.map((id) => ({ id })));

  /** Every queue the patterns allow, at a glance (the dashboard's first page). */
  overview(patterns?: string[]) {
    return readOverview(this.deps.db, patterns);
  }

  /** A queue with its latest counts; undefined when there is none. */
  find(name: string): Promise<{ queue: ListedQueueRow; stats?: QueueStatsRow } | undefined> {
    return getQueue(this.deps.db, name);
  }

  /** A queue with its latest counts (queue_not_found when there is none). */
  async get(name: string): Promise<{ queue: ListedQueueRow; stats?: QueueStatsRow }> {
    const found = await this.find(name);
    if (!found) throw queueNotFound(name);
    return found;
  }

  /** The queues whose dead jobs go to `target` (an SQS RedrivePolicy). */
  deadLetterSources(target: string) {
    return deadLetterRoutes(this.deps.db, target);
  }

  /** A page of queues in name order after `after`, those the patterns allow (and named with `prefix`). */
  list(limit: number, after?: string, patterns?: string[], prefix?: string) {
    return listQueues(this.deps.db, limit, after, patterns, prefix);
  }

  /** A queue's minute samples of the last `minutes` minutes, oldest first, with the database's now. */
  async history(queue: string, minutes: number) {
    const history = await readQueueHistory(this.deps.db, queue, minutes);
    if (!history) throw queueNotFound(queue);
    return history;
  }

  /** One group of a queue (any name is a group), with the queue and when its groups were counted. */
  async group(queue: string, group: string) {
    const { queue: row } = await this.get(queue);
    const found = await getGroup(this.deps.db, queue, group);
    return { queue: row, group: found, countedAt: await groupsCountedAt(this.deps.db, queue) };
  }

  /** A page of a queue's groups, busiest first, with the queue and when its groups were counted. */
  async groups(queue: string, limit: number, after?: GroupListKey) {
    const { queue: row } = await this.get(queue);
    const page = await listGroups(this.deps.db, queue, limit, after);
    return { queue: row, page, countedAt: await groupsCountedAt(this.deps.db, queue) };
  }

  /** Create or configure a queue; whether it was created. */
  async configure(queue: string, changes: QueueChanges): Promise<{ created: boolean }> {
    const { created } = await this.deps.db.transaction().execute(async (trx) => {
      const current = await lockQueue(trx, queue, 'update');
      checkSettings(effectiveSettings({ ...current, ...changes }, this.deps.config));
      checkFifoGroupLimit(current?.meta, {
        field: 'group_concurrency_limit',
        limit: changes.group_concurrency_limit,
        nullKeepsOne: false,
      });
      return upsertQueue(trx, queue, changes);
    });
    if (!created) this.deps.notifier.jobsReady(queue, 1);
    return { created };
  }

  /**
   * Create a queue with these settings unless it exists (SQS CreateQueue): of concurrent creators
   * exactly one creates it, the others get the queue as that one left it, to compare with what they
   * asked for. An existing queue that an enqueue created becomes managed, unless `differs` says how
   * it is not what was asked for (then nothing changes).
   */
  async createOnce(
    queue: string,
    differs: (existing: QueueRow) => string | undefined,
    changes: QueueChanges,
  ): Promise<{ created: boolean; queue: QueueRow }> {
    checkSettings(effectiveSettings({ ...changes }, this.deps.config));
    return this.deps.db
      .transaction()
      .execute((trx) => createQueueOnce(trx, queue, changes, (existing) => !differs(existing)));
  }

  /**
   * Count these queues again now, live and finished jobs, instead of waiting for the leader (every
   * tick, finished ones once a minute): after an operator's action the figures they read next show
   * what it did (a redrive's dead jobs gone from the Dead count). A count per queue on its indexes.
   */
  async recount(queues: string[]): Promise<void> {
    if (queues.length === 0) return;
    await refreshLiveStats(this.deps.db, { only: queues });
    await refreshFinishedStats(this.deps.db, { queues });
  }

  /** Pause or resume a queue (queue_not_found when there is none). */
  async setPaused(queue: string, paused: boolean): Promise<void> {
    if (!(await setPaused(this.deps.db, queue, paused))) throw queueNotFound(queue);
    if (!paused) this.deps.waitList.wake(queue);
  }

  /** Delete a queue (with `force`, cancelling its live jobs first); how many jobs were cancelled. */
  async delete(queue: string, force: boolean): Promise<number> {
    const cancelled = await deleteQueue(this.deps.db, queue, force, this.finished);
    this.deps.metrics.cancelled(queue, cancelled);
    return cancelled;
  }

  /**
   * Cancel a queue's waiting jobs (ready and scheduled: the native purge leaves claimed ones to their
   * workers), or those of the given states (SQS's PurgeQueue takes the messages in flight too); how many.
   */
  async purge(queue: string, states?: readonly LiveState[]): Promise<number> {
    const cancelled = states
      ? await cancelQueueJobs(this.deps.db, queue, states, this.finished)
      : await purgeQueue(this.deps.db, queue, this.finished);
    this.deps.metrics.cancelled(queue, cancelled);
    await this.recount([queue]);
    return cancelled;
  }

  /**
   * Forget every idempotency key of a queue at once: SQS clears a FIFO queue's deduplication window
   * when it is purged, and a queue created again under a deleted one's name starts with none.
   */
  async forgetKeys(queue: string): Promise<void> {
    await forgetIdempotencyKeys(this.deps.db, queue);
  }

  /**
   * Send dead jobs back to ready (the queue is created again if it was collected); how many.
   * `onMoved` is told the ids of each batch moved.
   */
  async redrive(queue: string, filter: RedriveFilter, onMoved?: (ids: string[]) => void): Promise<number> {
    const { config } = this.deps;
    const autoCreate = { enabled: config.autoCreateQueues, maxQueues: config.maxAutoQueues };
    const redriven = await redriveDeadJobs(this.deps.db, queue, filter, {
      autoCreate,
      ...(onMoved ? { onMoved } : {}),
    });
    this.deps.notifier.jobsReady(queue, redriven);
    await this.recount([queue]);
    return redriven;
  }

  /** Override a group's limits, weight or pause (the queue must exist). */
  async putGroup(queue: string, group: string, changes: GroupChanges): Promise<void> {
    await this.deps.db.transaction().execute(async (trx) => {
      const current = await lockQueue(trx, queue, 'share');
      if (!current) throw queueNotFound(queue);
      // An SQS FIFO queue keeps one job per group in flight (null falls back to the queue's 1).
      checkFifoGroupLimit(current.meta, {
        field: 'concurrency_limit',
        limit: changes.concurrency_limit,
        nullKeepsOne: true,
      });
      await putGroupOverride(trx, queue, group, changes);
    });
    this.deps.notifier.jobsReady(queue, 1);
  }

  /** Drop a group's overrides; whether it had any. */
  async resetGroup(queue: string, group: string): Promise<boolean> {
    const reset = await deleteGroupOverride(this.deps.db, queue, group);
    if (reset) this.deps.notifier.jobsReady(queue, 1);
    return reset;
  }
}
