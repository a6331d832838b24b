import type { ClaimOutcome, ClaimRequest, HeldBack } from '../jobs/claim/types.js';
import type { ClaimGroups } from '../jobs/statement-groups.js';
import type { WaitList } from './wait-list.js';

export interface LongPollOptions extends ClaimRequest {
  waitMs: number;
  pollIntervalMs: number;
  /** Aborted when the client goes away. */
  signal?: AbortSignal;
  /** Told each time a limit held jobs back (flow control), for the metrics and the notifier. */
  onHeldBack?: (heldBack: HeldBack) => void;
}

/**
 * Claim, and when nothing is ready wait (holding no connection) until woken or the wait runs out.
 * The waiter is registered before each claim query, so an enqueue that commits while the query runs
 * still wakes it. Even without any wake-up it re-checks every pollIntervalMs: polling is the source
 * of truth, notifications only make it fast.
 *
 * A claim that a limit held back (flow control) waits the same way: a freed slot (an ack, nack,
 * cancel or re-arm of the queue) wakes it like new jobs do, and a rate limit tells it when its
 * window has room again, so it looks again then rather than polling.
 */
export async function claimWithWait(
  claims: Pick<ClaimGroups, 'claim'>,
  waitList: WaitList,
  opts: LongPollOptions,
): Promise<ClaimOutcome> {
  const deadline = Date.now() + opts.waitMs;
  while (true) {
    const handle = opts.waitMs > 0 ? waitList.register(opts.queue) : undefined;
    let outcome: ClaimOutcome;
    try {
      outcome = await claims.claim(opts);
    } catch (err) {
      handle?.cancel();
      throw err;
    }
    if (outcome.heldBack) opts.onHeldBack?.(outcome.heldBack);
    if (outcome.jobs.length > 0 || !handle) {
      handle?.cancel();
      // A full batch suggests more are ready: pass the baton to the next waiter of this queue.
      if (outcome.jobs.length === opts.maxJobs) waitList.wake(opts.queue, 1);
      return outcome;
    }
    const remaining = deadline - Date.now();
    if (remaining <= 0 || opts.signal?.aborted) {
      handle.cancel();
      return outcome;
    }
    const onAbort = () => handle.cancel();
    opts.signal?.addEventListener('abort', onAbort, { once: true });
    const nap = Math.min(
      remaining,
      opts.pollIntervalMs,
      outcome.heldBack?.retryAfterMs ?? Number.POSITIVE_INFINITY,
    );
    const reason = await handle.wait(nap);
    opts.signal?.removeEventListener('abort', onAbort);
    if (reason === 'closed' || opts.signal?.aborted) return { jobs: [] };
  }
}
