import type { WakeReason } from './wait-list.js';

/**
 * In-process registry of requests awaiting jobs' ends (GET /v1/jobs/{id}?wait_ms, POST
 * /v1/jobs/await), per job id: the claims' WaitList does the same per queue. A waiter holds no
 * database connection; it sleeps here until one of its jobs finishes on this replica (the service,
 * after the write committed), another replica says so (a NOTIFY, listener.ts), its poll interval
 * passes, or the server shuts down. Then it reads its jobs again: the database says what is finished.
 */

interface Waiter {
  resolve(reason: WakeReason): void;
}

export interface FinishWait {
  /** Sleep until woken, at most timeoutMs. */
  wait(timeoutMs: number): Promise<WakeReason>;
  cancel(): void;
  /** The server is shutting down (the list was closed): the database may be closing too. */
  readonly closed: boolean;
}

export class FinishWaitList {
  private readonly byId = new Map<string, Set<Waiter>>();
  private closed = false;

  /**
   * Register one waiter for these jobs (any of them finishing wakes it). Registered before the read
   * that finds them unfinished, so an end committed while that read runs still wakes it.
   */
  register(ids: readonly string[]): FinishWait {
    let settle: (reason: WakeReason) => void = () => {};
    const settled = new Promise<WakeReason>((resolve) => {
      settle = resolve;
    });
    let timer: NodeJS.Timeout | undefined;
    let done = false;
    let closed = false;
    const waiter: Waiter = {
      resolve: (reason) => {
        if (done) return;
        done = true;
        closed = reason === 'closed';
        clearTimeout(timer);
        for (const id of ids) this.remove(id, waiter);
        settle(reason);
      },
    };
    if (this.closed) waiter.resolve('closed');
    else {
      for (const id of ids) {
        const set = this.byId.get(id) ?? new Set();
        this.byId.set(id, set);
        set.add(waiter);
      }
    }
    return {
      wait: (timeoutMs) => {
        if (!done) timer = setTimeout(() => waiter.resolve('timeout'), Math.max(0, timeoutMs));
        return settled;
      },
      cancel: () => waiter.resolve('timeout'),
      get closed() {
        return closed;
      },
    };
  }

  /** Is any request of this replica awaiting a job? (An ack asks before it looks at its ids.) */
  get empty(): boolean {
    return this.byId.size === 0;
  }

  /** Is a request of this replica awaiting this job? */
  awaits(id: string): boolean {
    return this.byId.has(id);
  }

  /** These jobs finished: wake every waiter of any of them. */
  wake(ids: Iterable<string>): number {
    let woken = 0;
    for (const id of ids) {
      const set = this.byId.get(id);
      if (!set) continue;
      for (const waiter of [...set]) {
        waiter.resolve('woken');
        woken++;
      }
    }
    return woken;
  }

  /** Wake every waiter (after a gap in notifications: each reads its jobs again). */
  wakeEveryone(): void {
    this.wake([...this.byId.keys()]);
  }

  waiting(): number {
    const waiters = new Set<Waiter>();
    for (const set of this.byId.values()) for (const w of set) waiters.add(w);
    return waiters.size;
  }

  /** Shutdown: every waiter returns at once, and new ones return immediately. */
  close(): void {
    this.closed = true;
    for (const set of [...this.byId.values()]) for (const w of [...set]) w.resolve('closed');
  }

  private remove(id: string, waiter: Waiter) {
    const set = this.byId.get(id);
    if (!set) return;
    set.delete(waiter);
    if (set.size === 0) this.byId.delete(id);
  }
}
