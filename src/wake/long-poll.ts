import type { ClaimedRow, ClaimRequest } from '../jobs/claim.js';
import type { ClaimGroups } from '../jobs/statement-groups.js';
import type { WaitList } from './wait-list.js';

export interface LongPollOptions extends ClaimRequest {
  waitMs: number;
  pollIntervalMs: number;
  /** Aborted when the client goes away. */
  signal?: AbortSignal;
}

/**
 * Claim, and when nothing is ready wait (holding no connection) until woken or the wait runs out.
 * The waiter is registered before each claim query, so an enqueue that commits while the query runs
 * still wakes it. Even without any wake-up it re-checks every pollIntervalMs: polling is the source
 * of truth, notifications only make it fast.
 */
export async function claimWithWait(
  claims: ClaimGroups,
  waitList: WaitList,
  opts: LongPollOptions,
): Promise<ClaimedRow[]> {
  const deadline = Date.now() + opts.waitMs;
  while (true) {
    const handle = opts.waitMs > 0 ? waitList.register(opts.queue) : undefined;
    let jobs: ClaimedRow[];
    try {
      jobs = await claims.claim(opts);
    } catch (err) {
      handle?.cancel();
      throw err;
    }
    if (jobs.length > 0 || !handle) {
      handle?.cancel();
      // A full batch suggests more are ready: pass the baton to the next waiter of this queue.
      if (jobs.length === opts.maxJobs) waitList.wake(opts.queue, 1);
      return jobs;
    }
    const remaining = deadline - Date.now();
    if (remaining <= 0 || opts.signal?.aborted) {
      handle.cancel();
      return [];
    }
    const onAbort = () => handle.cancel();
    opts.signal?.addEventListener('abort', onAbort, { once: true });
    const reason = await handle.wait(Math.min(remaining, opts.pollIntervalMs));
    opts.signal?.removeEventListener('abort', onAbort);
    if (reason === 'closed' || opts.signal?.aborted) return [];
  }
}
