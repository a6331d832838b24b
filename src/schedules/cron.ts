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

/**
 * A time zone named as the IANA zone database spells it. Intl alone is too lenient: Node 24 takes
 * UTC offsets (`+02:00`, which have no daylight-saving rule, so a schedule written with one silently
 * keeps summer time all year) and any capitalisation (`europe/paris`). Accepted:
 * - a name Intl lists (Intl.supportedValuesOf('timeZone'): Europe/Paris, America/New_York), or one
 *   Intl answers with exactly the spelling given (UTC, Etc/GMT+2, Asia/Calcutta);
 * - a link to such a zone (US/Eastern, Asia/Kolkata, Europe/Kyiv, Etc/UTC, GMT). Intl resolves links
 *   without regard to case and never says how the database spells them, so for a link only the shape
 *   can be checked: not just a re-capitalised zone name, every part starting with a capital, and every
 *   part of a multi-part name holding a small letter, unless it is an abbreviation of up to three
 *   capitals (US/Eastern, Australia/ACT) or one of Etc's GMT/UTC/UCT forms. `US/EASTERN` is refused;
 *   `Us/Eastern` gets through (the zone is still the right one).
 */
export function isTimeZone(timezone: string): boolean {
  // Offsets: Intl takes them, the zone database has no such names.
  if (/^[+-]/.test(timezone)) return false;
  let resolved: string;
  try {
    resolved = new Intl.DateTimeFormat('en-US', { timeZone: timezone }).resolvedOptions().timeZone;
  } catch {
    return false;
  }
  if (resolved === timezone || zoneNames().has(timezone)) return true;
  if (resolved.toLowerCase() === timezone.toLowerCase()) return false;
  const parts = timezone.split('/');
  return parts.every(
    (part) =>
      /^[A-Z]/.test(part) &&
      (parts.length === 1 || /[a-z]/.test(part) || /^[A-Z]{1,3}$/.test(part) || /^(GMT|UTC|UCT)/.test(part)),
  );
}

let zones: Set<string> | undefined;
const zoneNames = () => {
  zones ??= new Set(Intl.supportedValuesOf('timeZone'));
  return zones;
};

/**
 * How many occurrences after `from` are looked at for the closest two. A cron's occurrences are a
 * product of its fields' value sets, so its closest pair recurs in every run through its finest
 * field (at most 60 values), and usually shows within the first few; 100 also covers a list whose
 * close pair comes once an hour or once a day, at a cost of well under a millisecond.
 */
const OCCURRENCES_CHECKED = 100;

/**
 * Parse and check; a cron that has no occurrence after `from` (30 February) is refused too, and so
 * is one whose occurrences come closer together than `minIntervalMs` (BATON_SCHEDULE_MIN_INTERVAL_MS):
 * `* * * * * *` enqueues 86,400 jobs a day.
 */
export function checkCron(
  cron: string,
  timezone: string,
  from: Date,
  minIntervalMs = 0,
): CronProblem | undefined {
  if (!isTimeZone(timezone)) {
    return {
      field: 'timezone',
      message:
        'is not an IANA time zone name as the zone database spells it (such as UTC, Europe/Berlin or ' +
        'Etc/GMT-2; not an offset such as +02:00, not europe/berlin)',
    };
  }
  let plan: CronPlan;
  try {
    plan = cronPlan(cron, timezone);
  } catch (err) {
    return { field: 'cron', message: `is not a cron expression: ${cleanMessage(err)}` };
  }
  let previous = plan.nextAfter(from);
  if (!previous) return { field: 'cron', message: 'never fires (no such date in any year)' };
  for (let i = 1; i < OCCURRENCES_CHECKED && minIntervalMs > 0; i++) {
    const next = plan.nextAfter(previous);
    if (!next) break;
    const gap = next.getTime() - previous.getTime();
    if (gap < minIntervalMs) {
      return {
        field: 'cron',
        message:
          `fires ${gap} ms apart (${previous.toISOString()} and ${next.toISOString()}), more often than this ` +
          `server allows: at least ${minIntervalMs} ms between occurrences (BATON_SCHEDULE_MIN_INTERVAL_MS)`,
      };
    }
    previous = next;
  }
  return undefined;
}

const cleanMessage = (err: unknown) => String((err as Error).message ?? err).replace(/^CronPattern: /, '');

/**
 * Parsing is not free; with thousands of schedules firing every minute the leader would parse the
 * same few expressions over and over, so plans are kept (a small map, cleared when it fills).
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
