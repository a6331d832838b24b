import type { Notifier } from './notifier.js';

/** A job as the await loop sees it: its id and state. */
export interface AwaitedJob {
  id: string;
  state: string;
}

export interface AwaitOptions<J extends AwaitedJob> {
  ids: readonly string[];
  /** Read the jobs (those that exist, by id): the database is the truth, every wake-up reads again. */
  read: () => Promise<Map<string, J>>;
  isFinished: (job: J) => boolean;
  waitMs: number;
  pollIntervalMs: number;
  /** Aborted when the client goes away: the wait ends at once. */
  signal?: AbortSignal;
}

/**
 * Read jobs, and while any of them that exists has not finished, wait (holding no connection) until
 * one finishes, the wait runs out, the client goes away or the server closes; then answer the jobs
 * as last read.
 *
 * A job already finished costs one read and nothing else. Otherwise the waiter registers in this
 * replica's FinishWaitList before the next read (so an end committing while that read runs still
 * wakes it), and the first time, tells the other replicas which jobs it awaits and waits for that
 * notice to be sent (Notifier.awaiting), so an end committed on another replica after this read is
 * told back to it. Between an end's commit and that replica hearing of the wait there is a moment
 * (the notice on its way) in which the end is not told; polling every pollIntervalMs covers it, as it
 * covers a lost LISTEN connection: polling is the truth, notifications are speed.
 */
export async function awaitFinished<J extends AwaitedJob>(
  notifier: Notifier,
  opts: AwaitOptions<J>,
): Promise<Map<string, J>> {
  const deadline = Date.now() + opts.waitMs;
  const unfinished = (jobs: Map<string, J>) =>
    opts.ids.filter((id) => {
      const job = jobs.get(id);
      return job !== undefined && !opts.isFinished(job);
    });
  let jobs = await opts.read();
  let announced = false;
  let waited = false;
  while (true) {
    const pending = unfinished(jobs);
    if (pending.length === 0 || opts.signal?.aborted) return jobs;
    const remaining = deadline - Date.now();
    // The wait ran out: one last look, since an end may have gone untold.
    if (remaining <= 0) return waited ? opts.read() : jobs;
    const handle = notifier.finishWaits.register(pending);
    try {
      if (!announced) {
        await notifier.awaiting(pending, remaining);
        announced = true;
      }
      // Shut down while the notice went out: the jobs as last read, never a read of a database
      // the server is closing (a 500 instead of the answer).
      if (handle.closed) return jobs;
      jobs = await opts.read();
    } catch (err) {
      handle.cancel();
      throw err;
    }
    if (unfinished(jobs).length === 0 || opts.signal?.aborted) {
      handle.cancel();
      return jobs;
    }
    const onAbort = () => handle.cancel();
    opts.signal?.addEventListener('abort', onAbort, { once: true });
    const reason = await handle.wait(Math.min(deadline - Date.now(), opts.pollIntervalMs));
    opts.signal?.removeEventListener('abort', onAbort);
    if (reason === 'closed' || opts.signal?.aborted) return jobs;
    // Woken, or the poll interval passed: register again and read (the loop's next turn).
    waited = true;
  }
}
