import type { CronPlan } from './cron.js';

/**
 * What the leader does with a schedule that is due, decided from the database's clock alone. Pure,
 * so every rule is tested without a database (test/schedules/occurrences.test.ts).
 *
 * Due occurrences are those from the schedule's `next_run_at` up to `now`. Normally there is one, a
 * few hundred milliseconds old. More than one, or one older than the grace (BATON_SCHEDULE_GRACE_MS),
 * means the leader was away (downtime, or a failover slower than the grace), and `catch_up` says what
 * to do:
 * - `none`: only the latest occurrence, and only if it is within the grace; the rest are missed;
 * - `latest`: one job, for the latest occurrence; the earlier ones are coalesced into it;
 * - `all`: a job for each, oldest first, at most CATCH_UP_ALL_MAX (the most recent ones); older
 *   ones are missed.
 * Then `overlap: skip` holds back every occurrence while the previous job is live, and lets at most
 * one through otherwise (the jobs of one run would overlap each other).
 */

export type CatchUp = 'none' | 'latest' | 'all';
export type Overlap = 'allow' | 'skip';

/** The bound of `catch_up: all`: jobs enqueued for one schedule's missed occurrences at most. */
export const CATCH_UP_ALL_MAX = 100;
/** Due occurrences enumerated one by one at most; beyond it only the latest are looked up. */
const ENUMERATE_MAX = 1000;

export interface DueSchedule {
  nextRunAt: Date;
  catchUp: CatchUp;
  overlap: Overlap;
  /** The previous occurrence's job is still scheduled, ready or claimed. */
  previousJobLive: boolean;
}

export interface Decision {
  /** Occurrences to enqueue now, oldest first. */
  enqueue: Date[];
  skipped: number;
  missed: number;
  coalesced: number;
  /** The next occurrence after now; undefined when the cron never fires again. */
  next: Date | undefined;
}

export function decide(plan: CronPlan, s: DueSchedule, now: Date, graceMs: number): Decision {
  const { due, uncounted, after } = dueOccurrences(plan, s.nextRunAt, now);
  const next = after ?? plan.nextAfter(now);
  const total = due.length + uncounted;
  const latest = due.at(-1);
  let enqueue: Date[] = [];
  let missed = 0;
  let coalesced = 0;
  if (latest) {
    if (s.catchUp === 'none') {
      enqueue = now.getTime() - latest.getTime() <= graceMs ? [latest] : [];
      missed = total - enqueue.length;
    } else if (s.catchUp === 'latest') {
      enqueue = [latest];
      coalesced = total - 1;
    } else {
      enqueue = due.slice(-CATCH_UP_ALL_MAX);
      missed = total - enqueue.length;
    }
  }
  let skipped = 0;
  if (s.overlap === 'skip') {
    const allowed = s.previousJobLive ? 0 : Math.min(1, enqueue.length);
    skipped = enqueue.length - allowed;
    enqueue = enqueue.slice(0, allowed);
  }
  return { enqueue, skipped, missed, coalesced, next };
}

/**
 * Occurrences from `first` (itself one) up to `now`, oldest first. After a long outage a schedule
 * can owe very many (a per-second cron after a day: 86,400); past ENUMERATE_MAX the rest are
 * counted, not listed, and the list ends with the latest CATCH_UP_ALL_MAX, which is all any rule
 * needs.
 */
function dueOccurrences(
  plan: CronPlan,
  first: Date,
  now: Date,
): { due: Date[]; uncounted: number; after?: Date } {
  if (first > now) return { due: [], uncounted: 0 };
  const due = [first];
  let t: Date | undefined = first;
  while (due.length < ENUMERATE_MAX) {
    t = plan.nextAfter(t);
    // The first occurrence past now is the schedule's next: found here, not computed again (a
    // croner step is not free, and thousands of schedules may come due at once).
    if (!t || t > now) return { due, uncounted: 0, after: t };
    due.push(t);
  }
  // Too many to list: keep the latest ones, and estimate the rest from the average spacing so far.
  const tail = plan.latest(CATCH_UP_ALL_MAX, now).filter((d) => d > due.at(-1)!);
  const spacing = (due.at(-1)!.getTime() - first.getTime()) / (due.length - 1);
  const between = tail.length > 0 ? tail[0]!.getTime() - due.at(-1)!.getTime() : 0;
  const uncounted = Math.max(0, Math.round(between / spacing) - 1);
  return { due: [...due, ...tail], uncounted };
}
