/**
 * In-process registry of long-polling claims, per queue. A waiting claim holds no database
 * connection: it sleeps here until woken (an enqueue in this process, a NOTIFY from another
 * replica, a promotion), until its poll interval passes, or until shutdown.
 */

export type WakeReason = 'woken' | 'timeout' | 'closed';

interface Waiter {
  resolve(reason: WakeReason): void;
}

export class WaitList {
  private readonly byQueue = new Map<string, Set<Waiter>>();
  private closed = false;

  /**
   * Register a waiter now and return a handle. Registering before the claim query (and awaiting
   * after it) means a wake-up that lands while the query runs is not missed.
   */
  register(queue: string): { wait(timeoutMs: number): Promise<WakeReason>; cancel(): void } {
    let settle: (reason: WakeReason) => void = () => {};
    const settled = new Promise<WakeReason>((resolve) => {
      settle = resolve;
    });
    let timer: NodeJS.Timeout | undefined;
    const waiter: Waiter = {
      resolve: (reason) => {
        clearTimeout(timer);
        this.remove(queue, waiter);
        settle(reason);
      },
    };
    if (this.closed) waiter.resolve('closed');
    else {
      const set = this.byQueue.get(queue) ?? new Set();
      this.byQueue.set(queue, set);
      set.add(waiter);
    }
    return {
      wait: (timeoutMs) => {
        timer = setTimeout(() => waiter.resolve('timeout'), Math.max(0, timeoutMs));
        return settled;
      },
      cancel: () => waiter.resolve('timeout'),
    };
  }

  /** Wake up to `count` waiters of a queue, oldest first (all of them by default). */
  wake(queue: string, count = Number.POSITIVE_INFINITY): number {
    const set = this.byQueue.get(queue);
    if (!set) return 0;
    let woken = 0;
    for (const waiter of [...set]) {
      if (woken >= count) break;
      waiter.resolve('woken');
      woken++;
    }
    return woken;
  }

  /** Wake every waiter of every queue (after a gap in notifications). */
  wakeEveryone(): void {
    for (const queue of [...this.byQueue.keys()]) this.wake(queue);
  }

  waiting(queue?: string): number {
    if (queue !== undefined) return this.byQueue.get(queue)?.size ?? 0;
    let n = 0;
    for (const set of this.byQueue.values()) n += set.size;
    return n;
  }

  /** Shutdown: every waiter returns at once (with no jobs), and new ones return immediately. */
  close(): void {
    this.closed = true;
    for (const set of [...this.byQueue.values()]) for (const w of [...set]) w.resolve('closed');
  }

  private remove(queue: string, waiter: Waiter) {
    const set = this.byQueue.get(queue);
    if (!set) return;
    set.delete(waiter);
    if (set.size === 0) this.byQueue.delete(queue);
  }
}
