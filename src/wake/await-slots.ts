/**
 * How many requests may await jobs at once on this replica, and how many jobs they may await in all,
 * per API key and for the replica (BATON_AWAIT_MAX_*). A waiter costs no connection and no read of
 * its own, but it holds a socket and its ids go into the replica's poll: without a cap, one tenant
 * could hold enough of them to crowd out everyone else's. A request takes its slot before its first
 * read and gives it back when answered; shutdown waits for every slot to come back, so no await is
 * still reading when the database closes.
 */

export interface AwaitLimits {
  maxWaiters: number;
  maxWaitersPerKey: number;
  maxJobs: number;
  maxJobsPerKey: number;
}

interface Held {
  waiters: number;
  jobs: number;
}

export type SlotOutcome = { release: () => void } | { refused: string };

export class AwaitSlots {
  private readonly total: Held = { waiters: 0, jobs: 0 };
  private readonly byKey = new Map<string, Held>();
  private drainedNow: (() => void)[] = [];

  constructor(private readonly limits: AwaitLimits) {}

  /**
   * A slot for a request of `key` awaiting `jobs` jobs, or why not: the setting whose cap it would
   * pass. Release it exactly once.
   */
  take(key: string, jobs: number): SlotOutcome {
    const mine = this.byKey.get(key) ?? { waiters: 0, jobs: 0 };
    const { maxWaiters, maxWaitersPerKey, maxJobs, maxJobsPerKey } = this.limits;
    const refused =
      mine.waiters + 1 > maxWaitersPerKey
        ? `this API key already has ${mine.waiters} requests awaiting jobs on this replica (BATON_AWAIT_MAX_WAITERS_PER_KEY)`
        : mine.jobs + jobs > maxJobsPerKey
          ? `this API key's requests already await ${mine.jobs} jobs on this replica; ${jobs} more would pass BATON_AWAIT_MAX_JOBS_PER_KEY (${maxJobsPerKey})`
          : this.total.waiters + 1 > maxWaiters
            ? `this replica already holds ${this.total.waiters} requests awaiting jobs (BATON_AWAIT_MAX_WAITERS)`
            : this.total.jobs + jobs > maxJobs
              ? `this replica's requests already await ${this.total.jobs} jobs; ${jobs} more would pass BATON_AWAIT_MAX_JOBS (${maxJobs})`
              : undefined;
    if (refused) return { refused };
    this.byKey.set(key, mine);
    this.add(mine, 1, jobs);
    let released = false;
    return {
      release: () => {
        if (released) return;
        released = true;
        this.add(mine, -1, -jobs);
        if (mine.waiters === 0) this.byKey.delete(key);
        if (this.total.waiters === 0) for (const resolve of this.drainedNow.splice(0)) resolve();
      },
    };
  }

  /** Requests holding a slot now. */
  held(): number {
    return this.total.waiters;
  }

  /** Resolves once no request holds a slot (at shutdown, after the wait list was closed). */
  drained(): Promise<void> {
    if (this.total.waiters === 0) return Promise.resolve();
    return new Promise((resolve) => this.drainedNow.push(resolve));
  }

  private add(mine: Held, waiters: number, jobs: number) {
    mine.waiters += waiters;
    mine.jobs += jobs;
    this.total.waiters += waiters;
    this.total.jobs += jobs;
  }
}
