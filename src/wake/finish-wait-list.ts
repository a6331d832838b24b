import type { WakeReason } from './wait-list.js';

/**
 * In-process registry of requests awaiting jobs' ends (GET /v1/jobs/{id}?wait_ms, POST
 * /v1/jobs/await), per job id: the claims' WaitList does the same per queue. A waiter holds no
 * database connection and reads nothing while it waits: it is told which of its jobs finished, by
 * this replica's writes (the service, after the write committed), by another replica (a NOTIFY,
 * listener.ts), or by the replica's one poll of everything awaited here (finish-poll.ts), and it
 * sleeps until all of them have, its wait runs out, or the server shuts down. Only then does it read
 * its jobs (once, whole).
 */

/** A job a waiter awaits, with the queue its key may see it in (undefined: any queue). */
export interface AwaitedItem {
  id: string;
  queue?: string;
}

interface Waiter {
  /** The jobs not known to have finished yet, each with its item's queue. */
  pending: Map<string, string | undefined>;
  resolve(reason: WakeReason): void;
}

export interface FinishWait {
  /** Sleep until every job has finished ('woken'), at most timeoutMs ('timeout'), or shutdown ('closed'). */
  wait(timeoutMs: number): Promise<WakeReason>;
  cancel(): void;
  /**
   * Have the jobs checked once now that the waiter is registered (and the other replicas told): the
   * check an end committed just before the registration needs, shared with other registrations.
   */
  check(): void;
  /** The server is shutting down (the list was closed). */
  readonly closed: boolean;
}

export class FinishWaitList {
  private readonly byId = new Map<string, Set<Waiter>>();
  private count = 0;
  private closed = false;
  /** Told of a registered waiter's ids (the poll checks them at once: the read after registering). */
  onRegistered: (ids: readonly string[]) => void = () => {};
  /** Asked to look at every awaited job now (after a gap in notifications). */
  onLookNow: () => void = () => {};

  /**
   * Register one waiter for these jobs (it wakes once every one of them has finished). Registered
   * before the check that finds them unfinished (FinishWait.check), so an end committed meanwhile
   * still wakes it.
   */
  register(items: readonly AwaitedItem[]): FinishWait {
    let settle: (reason: WakeReason) => void = () => {};
    const settled = new Promise<WakeReason>((resolve) => {
      settle = resolve;
    });
    let timer: NodeJS.Timeout | undefined;
    let done = false;
    let closed = false;
    const waiter: Waiter = {
      pending: new Map(items.map((item) => [item.id, item.queue])),
      resolve: (reason) => {
        if (done) return;
        done = true;
        closed = reason === 'closed';
        clearTimeout(timer);
        for (const id of waiter.pending.keys()) this.remove(id, waiter);
        this.count--;
        settle(reason);
      },
    };
    this.count++;
    if (this.closed || waiter.pending.size === 0) waiter.resolve(this.closed ? 'closed' : 'woken');
    else {
      for (const id of waiter.pending.keys()) {
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
      check: () => {
        if (!done) this.onRegistered([...waiter.pending.keys()]);
      },
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

  /** Every job awaited here, once each: what the poll reads. */
  ids(): string[] {
    return [...this.byId.keys()];
  }

  /**
   * These jobs finished (this replica's write committed, or another replica said so): each waiter
   * counts them off, and those left with none unfinished are woken.
   */
  wake(ids: Iterable<string>): number {
    return this.finished([...ids].map((id) => ({ id })));
  }

  /**
   * These jobs are finished, as the poll read them: with `queue`, a waiter counts a job off only if
   * its key may see that queue, so a waiter learns nothing of a job its key may not read.
   */
  finished(jobs: readonly { id: string; queue?: string }[]): number {
    let woken = 0;
    for (const job of jobs) {
      const set = this.byId.get(job.id);
      if (!set) continue;
      for (const waiter of [...set]) {
        const scope = waiter.pending.get(job.id);
        if (job.queue !== undefined && scope !== undefined && scope !== job.queue) continue;
        waiter.pending.delete(job.id);
        this.remove(job.id, waiter);
        if (waiter.pending.size === 0) {
          waiter.resolve('woken');
          woken++;
        }
      }
    }
    return woken;
  }

  /** After a gap in notifications (the LISTEN connection re-made): look at every awaited job now. */
  wakeEveryone(): void {
    if (!this.empty) this.onLookNow();
  }

  /** Requests waiting now. */
  waiting(): number {
    return this.count;
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
