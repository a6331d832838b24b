import type { Db } from '../db/database.js';
import { logFieldsOf } from '../db/errors.js';
import { finishedAmong } from '../jobs/awaited.js';
import type { Log } from '../logger.js';
import type { FinishWaitList } from './finish-wait-list.js';

/**
 * The one check per replica of everything awaited there: every `intervalMs` while anyone waits, a
 * single statement reads which of the awaited jobs have finished (ids and queues, from history:
 * jobs/awaited.ts finishedAmong) and the wait list wakes the waiters whose jobs all have. So 3,000
 * requests awaiting jobs cost the database one small read a second, not 3,000.
 *
 * A waiter that registers needs a read after its registration (an end committed just before it
 * registered told nobody): its ids are checked within `windowMs`, together with those of every other
 * request registering meanwhile, in one statement. Notifications (this replica's acks, another
 * replica's `f`) wake waiters sooner; this poll is the truth that covers what they miss.
 */
export class FinishPoll {
  private timer: NodeJS.Timeout | undefined;
  private freshTimer: NodeJS.Timeout | undefined;
  private fresh = new Set<string>();
  private polling = false;
  private again = false;
  private stopped = false;

  constructor(
    private readonly db: Db,
    private readonly list: FinishWaitList,
    private readonly intervalMs: number,
    private readonly log: Log,
    private readonly windowMs = 2,
  ) {
    list.onRegistered = (ids) => this.checkSoon(ids);
    list.onLookNow = () => this.pollNow();
  }

  /** Check these newly awaited jobs within windowMs (with any others registered meanwhile). */
  private checkSoon(ids: readonly string[]): void {
    if (this.stopped) return;
    for (const id of ids) this.fresh.add(id);
    this.freshTimer ??= setTimeout(() => void this.checkFresh(), this.windowMs);
    this.timer ??= setTimeout(() => void this.poll(), this.intervalMs);
  }

  private async checkFresh(): Promise<void> {
    this.freshTimer = undefined;
    const ids = [...this.fresh].filter((id) => this.list.awaits(id));
    this.fresh = new Set();
    await this.read(ids);
  }

  /** Look at every awaited job now (and then every intervalMs again). */
  private pollNow(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    void this.poll();
  }

  private async poll(): Promise<void> {
    this.timer = undefined;
    if (this.stopped) return;
    if (this.polling) {
      this.again = true;
      return;
    }
    this.polling = true;
    try {
      await this.read(this.list.ids());
    } finally {
      this.polling = false;
    }
    if (this.again) {
      this.again = false;
      return this.poll();
    }
    if (!this.list.empty && !this.stopped) this.timer ??= setTimeout(() => void this.poll(), this.intervalMs);
  }

  private async read(ids: string[]): Promise<void> {
    if (ids.length === 0 || this.stopped) return;
    try {
      this.list.finished(await finishedAmong(this.db, ids));
    } catch (err) {
      // The next poll tries again; meanwhile notifications still wake waiters.
      this.log.warn(logFieldsOf(err), 'the check of awaited jobs failed; trying again at the next poll');
    }
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
    clearTimeout(this.freshTimer);
  }
}
