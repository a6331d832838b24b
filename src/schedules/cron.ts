import { Cron } from 'croner';

/**
 * Cron expressions, through croner (never a parser of our own). Why croner and not cron-parser:
 * croner documents its daylight-saving rule and keeps to it (Vixie cron's, as croner-rust does),
 * while cron-parser leaves the answer to Luxon's arithmetic, and the two disagreed where it matters:
 * for `30 2 * * *` in Europe/Berlin on the spring-forward day cron-parser fires at 03:30 (the gap's
 * length later), and for `30 1-3 * * *` on the fall-back day it runs the first 02:30 but not the
 * second, while for `0 * * * *` it runs both. croner's rule, which Baton documents as its own:
 *
 * - a fixed time (one value in each of second, minute and hour, e.g. `30 2 * * *`) that a
 *   spring-forward gap skips runs at the first valid time after the gap, the same day (03:00 in
 *   Berlin); one that the fall-back hour repeats runs once, at the first pass (02:30 summer time);
 * - an interval (a wildcard, step, range or list in second, minute or hour, e.g. `*\/30 * * * *`)
 *   skips the times a gap removes and runs at both passes of a repeated hour.
 *
 * Occurrences are always computed from times the database gave us (src/schedules/fire.ts), so a
 * replica's own clock never decides when a schedule is due.
 */

/** 5 fields (minute ... day of week), or 6 with seconds first; croner's nicknames (@daily, ...) too. */
const MODE = '5-or-6-parts';

export interface CronPlan {
  cron: string;
  timezone: string;
  /** The first occurrence strictly after `after`, or undefined when the cron never fires again. */
  nextAfter(after: Date): Date | undefined;
  /** Up to `n` most recent occurrences at or before `atOrBefore`, oldest first. */
  latest(n: number, atOrBefore: Date): Date[];
}

/** Why an expression or a time zone is refused, naming the field; undefined when both are fine. */
export type CronProblem = { field: 'cron' | 'timezone'; message: string };

export function isTimeZone(timezone: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: timezone });
    return true;
  } catch {
    return false;
  }
}

/** Parse and check; a cron that has no occurrence after `from` (30 February) is refused too. */
export function checkCron(cron: string, timezone: string, from: Date): CronProblem | undefined {
  if (!isTimeZone(timezone)) {
    return { field: 'timezone', message: `is not an IANA time zone name (such as UTC or Europe/Berlin)` };
  }
  let plan: CronPlan;
  try {
    plan = cronPlan(cron, timezone);
  } catch (err) {
    return { field: 'cron', message: `is not a cron expression: ${cleanMessage(err)}` };
  }
  if (!plan.nextAfter(from)) return { field: 'cron', message: 'never fires (no such date in any year)' };
  return undefined;
}

const cleanMessage = (err: unknown) => String((err as Error).message ?? err).replace(/^CronPattern: /, '');

/**
 * Parsing costs about 30 µs; with thousands of schedules firing every minute the leader would parse
 * the same few expressions over and over, so plans are kept (a small map, cleared when it fills).
 */
const plans = new Map<string, CronPlan>();
const PLAN_CACHE_MAX = 10_000;

export function cronPlan(cron: string, timezone: string): CronPlan {
  const key = `${timezone}\u0000${cron}`;
  let plan = plans.get(key);
  if (plan) return plan;
  const job = new Cron(cron, { timezone, mode: MODE, paused: true });
  plan = {
    cron,
    timezone,
    nextAfter: (after) => job.nextRun(after) ?? undefined,
    // previousRuns() leaves out the reference time's own second, so ask from a second later.
    latest: (n, atOrBefore) =>
      job
        .previousRuns(n + 1, new Date(atOrBefore.getTime() + 1000))
        .filter((d) => d <= atOrBefore)
        .slice(0, n)
        .reverse(),
  };
  if (plans.size >= PLAN_CACHE_MAX) plans.clear();
  plans.set(key, plan);
  return plan;
}
