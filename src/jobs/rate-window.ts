/**
 * The sliding window of a rate limit ("at most `limit` jobs claimed in any `periodMs`"), kept in
 * baton.flow_state as two parallel arrays: the start of each bucket that saw claims, and how many
 * jobs were claimed in it. A bucket is a hundredth of the period.
 *
 * Why buckets and not one entry per claim: a log of every claim is exact but grows with the limit
 * (a limit of 100,000 an hour is an array of up to 100,000 times, rewritten by every claim). With
 * buckets the window is at most ~101 entries whatever the limit. The price is that a bucket counts
 * until its END has left the window, so a claim is let through at most one bucket (1% of the period)
 * later than a perfect log would: never more than `limit` in any window, sometimes slightly fewer.
 *
 * Claims of one queue record their windows one after another (under the queue's flow lock), each
 * with the latest claimed_at of the jobs it took, so the window agrees with the jobs' own times.
 */
export interface RateWindow {
  /** Bucket starts, oldest first. */
  times: Date[];
  counts: number[];
}

export const emptyWindow = (): RateWindow => ({ times: [], counts: [] });

export const windowOf = (times: Date[] | null, counts: number[] | null): RateWindow => ({
  times: times ?? [],
  counts: counts ?? [],
});

const bucketMs = (periodMs: number) => Math.max(1, Math.floor(periodMs / 100));

/** The buckets still in the window at `now`: those whose end is after now - period. */
function live(window: RateWindow, periodMs: number, now: number): { start: number; n: number }[] {
  const width = bucketMs(periodMs);
  return window.times
    .map((t, i) => ({ start: t.getTime(), n: window.counts[i] ?? 0 }))
    .filter((b) => b.start + width > now - periodMs);
}

/**
 * How many more jobs may be claimed at `now`, and, when none, in how many ms the oldest buckets
 * will have left the window so that one more may.
 */
export function rateRoom(
  window: RateWindow,
  limit: number,
  periodMs: number,
  now: Date,
): { room: number; retryAfterMs?: number } {
  const buckets = live(window, periodMs, now.getTime());
  const used = buckets.reduce((sum, b) => sum + b.n, 0);
  if (used < limit) return { room: limit - used };
  const width = bucketMs(periodMs);
  let freed = 0;
  for (const b of buckets) {
    freed += b.n;
    if (used - freed < limit)
      return { room: 0, retryAfterMs: Math.max(1, b.start + width + periodMs - now.getTime()) };
  }
  return { room: 0, retryAfterMs: periodMs };
}

/** The window with `n` jobs claimed at `at` added, and the buckets that have left it dropped. */
export function recorded(window: RateWindow, periodMs: number, at: Date, n: number): RateWindow {
  const width = bucketMs(periodMs);
  const kept = live(window, periodMs, at.getTime());
  if (n > 0) {
    const start = Math.floor(at.getTime() / width) * width;
    const last = kept[kept.length - 1];
    if (last && last.start === start) last.n += n;
    else if (last && last.start > start)
      last.n += n; // clocks never run back under the lock; be safe anyway
    else kept.push({ start, n });
  }
  return { times: kept.map((b) => new Date(b.start)), counts: kept.map((b) => b.n) };
}
