import type { AwaitedItem } from './finish-wait-list.js';
import type { Notifier } from './notifier.js';

export interface AwaitOptions<A> {
  /** The jobs awaited, each with the queue its key may see it in. */
  items: readonly AwaitedItem[];
  /** Their ids and states (those that exist, in scope): all a waiter needs to know to wait. */
  readStates: () => Promise<Map<string, string>>;
  /** The answer, read once when it is due: the jobs whole (jobs/awaited.ts readAwaitAnswer). */
  readAnswer: () => Promise<A>;
  isFinished: (state: string) => boolean;
  waitMs: number;
  /** Aborted when the client goes away: the wait ends at once. */
  signal?: AbortSignal;
}

/**
 * Read the jobs' states, and while any of them that exists has not finished, wait (holding no
 * connection, reading nothing) until all have, the wait runs out, the client goes away or the server
 * closes; then read the answer, once.
 *
 * Jobs all finished already cost one read of their states and the answer's. Otherwise the waiter
 * registers in this replica's FinishWaitList, and the first time, tells the other replicas which jobs
 * it awaits and waits for that notice to be sent (Notifier.awaiting), so an end committed on another
 * replica after its check is told back to it; then has its jobs checked once (FinishWait.check, one
 * statement shared with every request registering meanwhile), so an end committed before the
 * registration is found. From then on it is told of its jobs' ends: by this replica's writes, by
 * another replica's notice, and by the replica's one poll of every awaited job each poll interval
 * (finish-poll.ts), which covers the moment between an end's commit and that replica hearing of the
 * wait, and a lost LISTEN connection: polling is the truth, notifications are speed.
 */
export async function awaitFinished<A>(notifier: Notifier, opts: AwaitOptions<A>): Promise<A> {
  const deadline = Date.now() + opts.waitMs;
  const states = await opts.readStates();
  const pending = opts.items.filter((item) => {
    const state = states.get(item.id);
    return state !== undefined && !opts.isFinished(state);
  });
  if (pending.length === 0 || opts.signal?.aborted || deadline <= Date.now()) return opts.readAnswer();
  const handle = notifier.finishWaits.register(pending);
  // From the moment it is registered: a client that leaves while the notice of the wait is being
  // sent must end it too (an abort listener added after that await would never hear it, and the
  // waiter would hold its slot for the whole wait).
  const onAbort = () => handle.cancel();
  opts.signal?.addEventListener('abort', onAbort, { once: true });
  try {
    if (!handle.closed) {
      await notifier.awaiting(
        pending.map((item) => item.id),
        deadline - Date.now(),
      );
    }
    handle.check();
    await handle.wait(deadline - Date.now());
  } catch (err) {
    handle.cancel();
    throw err;
  } finally {
    opts.signal?.removeEventListener('abort', onAbort);
  }
  return opts.readAnswer();
}
