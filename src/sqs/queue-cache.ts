import type { QueueDefaults } from '../queues/queue-settings.js';
import type { QueueUseCases } from '../service/queues.js';
import { queueDoesNotExist } from './errors.js';
import { type SqsQueue, sqsQueueOf } from './queue-attributes.js';

/**
 * The queues' SQS settings (default delay, receive wait, size limit), kept for up to a second per
 * replica, so that sending and receiving do not read the queue row on every request. SQS itself
 * documents that attribute changes take up to 60 seconds to apply everywhere and that a new queue
 * may need a second before use; changes made through this replica apply to it at once. A queue that
 * does not exist is never remembered, so one created a moment ago is found.
 */
export class QueueCache {
  private readonly entries = new Map<string, { queue: SqsQueue; until: number }>();

  constructor(
    private readonly queues: Pick<QueueUseCases, 'find'>,
    private readonly defaults: QueueDefaults,
    private readonly ttlMs = 1000,
    private readonly maxEntries = 10_000,
  ) {}

  /** The queue, or QueueDoesNotExist. */
  async get(name: string): Promise<SqsQueue> {
    const now = Date.now();
    const hit = this.entries.get(name);
    if (hit && hit.until > now) return hit.queue;
    const queue = await this.fresh(name);
    if (this.entries.size >= this.maxEntries) this.entries.clear();
    this.entries.set(name, { queue, until: now + this.ttlMs });
    return queue;
  }

  /** Read the queue now (with its statistics), bypassing the cache; QueueDoesNotExist if none. */
  async fresh(name: string): Promise<SqsQueue> {
    const found = await this.queues.find(name);
    if (!found) {
      this.entries.delete(name);
      throw queueDoesNotExist();
    }
    return sqsQueueOf(found, this.defaults);
  }

  forget(name: string): void {
    this.entries.delete(name);
  }
}
