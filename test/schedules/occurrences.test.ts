import { describe, expect, it } from 'vitest';
import { checkCron, cronPlan } from '../../src/schedules/cron.js';
import { CATCH_UP_ALL_MAX, type DueSchedule, decide } from '../../src/schedules/occurrences.js';

const iso = (dates: (Date | undefined)[]) => dates.map((d) => d?.toISOString());
const t = (s: string) => new Date(s);

/** The next `n` occurrences after `from`, as the leader walks them (each from the previous). */
function walk(cron: string, timezone: string, from: string, n: number): string[] {
  const plan = cronPlan(cron, timezone);
  const out: Date[] = [];
  let at = t(from);
  for (let i = 0; i < n; i++) {
    at = plan.nextAfter(at)!;
    out.push(at);
  }
  return iso(out) as string[];
}

describe('daylight saving time: 30 2 * * * in Europe/Berlin', () => {
  it('spring forward (2026-03-29, 02:00 CET → 03:00 CEST): 02:30 does not exist, so it runs at 03:00 CEST, once', () => {
    expect(walk('30 2 * * *', 'Europe/Berlin', '2026-03-27T12:00:00Z', 3)).toEqual([
      '2026-03-28T01:30:00.000Z', // 02:30 CET
      '2026-03-29T01:00:00.000Z', // 03:00 CEST: the first valid time after the gap, same day
      '2026-03-30T00:30:00.000Z', // 02:30 CEST
    ]);
  });

  it('fall back (2026-10-25, 03:00 CEST → 02:00 CET): 02:30 happens twice, it runs once, at the first', () => {
    expect(walk('30 2 * * *', 'Europe/Berlin', '2026-10-23T12:00:00Z', 3)).toEqual([
      '2026-10-24T00:30:00.000Z', // 02:30 CEST
      '2026-10-25T00:30:00.000Z', // 02:30 CEST, the first pass; not again at 01:30Z (02:30 CET)
      '2026-10-26T01:30:00.000Z', // 02:30 CET
    ]);
    // Even asked from between the two passes, the second 02:30 is not an occurrence.
    expect(walk('30 2 * * *', 'Europe/Berlin', '2026-10-25T00:45:00Z', 1)).toEqual([
      '2026-10-26T01:30:00.000Z',
    ]);
  });

  it('an interval cron runs through the repeated hour and skips the missing one', () => {
    // 30 1-3 * * * on the fall-back day: 01:30, 02:30 (CEST), 02:30 (CET), 03:30.
    expect(walk('30 1-3 * * *', 'Europe/Berlin', '2026-10-24T22:00:00Z', 4)).toEqual([
      '2026-10-24T23:30:00.000Z',
      '2026-10-25T00:30:00.000Z',
      '2026-10-25T01:30:00.000Z',
      '2026-10-25T02:30:00.000Z',
    ]);
    // On the spring-forward day: 01:30, then 03:30 (02:30 is skipped).
    expect(walk('30 1-3 * * *', 'Europe/Berlin', '2026-03-28T22:00:00Z', 3)).toEqual([
      '2026-03-29T00:30:00.000Z',
      '2026-03-29T01:30:00.000Z',
      '2026-03-29T23:30:00.000Z',
    ]);
  });

  it('latest() lists occurrences in real time across the change', () => {
    const plan = cronPlan('30 2 * * *', 'Europe/Berlin');
    expect(iso(plan.latest(3, t('2026-10-26T01:30:00Z')))).toEqual([
      '2026-10-24T00:30:00.000Z',
      '2026-10-25T00:30:00.000Z',
      '2026-10-26T01:30:00.000Z',
    ]);
  });
});

describe('checkCron', () => {
  const now = t('2026-11-30T09:00:00Z');
  it.each([
    ['61 * * * *', 'UTC', 'cron'],
    ['* * * *', 'UTC', 'cron'],
    ['0 0 0 * * * 2027', 'UTC', 'cron'], // 7 fields (years) are not taken
    ['not cron', 'UTC', 'cron'],
    ['0 0 30 2 *', 'UTC', 'cron'], // 30 February: never fires
    ['0 0 * * *', 'Mars/Olympus', 'timezone'],
  ])('%s in %s is refused, naming %s', (cron, tz, field) => {
    expect(checkCron(cron, tz, now)?.field).toBe(field);
  });

  it.each([['*/5 * * * *'], ['0 30 2 * * *'], ['@daily'], ['0 0 29 2 *']])('%s is accepted', (cron) => {
    expect(checkCron(cron, 'Europe/Berlin', now)).toBeUndefined();
  });
});

describe('decide: catch-up and overlap', () => {
  const plan = cronPlan('* * * * *', 'UTC'); // every minute
  const base = (over: Partial<DueSchedule> = {}): DueSchedule => ({
    nextRunAt: t('2026-11-30T09:00:00Z'),
    catchUp: 'latest',
    overlap: 'allow',
    previousJobLive: false,
    ...over,
  });
  const grace = 60_000;

  it('on time: one occurrence, enqueued whatever catch_up says; next is the following minute', () => {
    for (const catchUp of ['none', 'latest', 'all'] as const) {
      const d = decide(plan, base({ catchUp }), t('2026-11-30T09:00:00.300Z'), grace);
      expect(iso(d.enqueue)).toEqual(['2026-11-30T09:00:00.000Z']);
      expect(d).toMatchObject({ skipped: 0, missed: 0, coalesced: 0 });
      expect(d.next?.toISOString()).toBe('2026-11-30T09:01:00.000Z');
    }
  });

  it('after 10 minutes away: none runs only the latest (within the grace), latest one job, all each', () => {
    const now = t('2026-11-30T09:09:30Z'); // 09:00 ... 09:09 are due
    const none = decide(plan, base({ catchUp: 'none' }), now, grace);
    expect(iso(none.enqueue)).toEqual(['2026-11-30T09:09:00.000Z']);
    expect(none.missed).toBe(9);
    const latest = decide(plan, base({ catchUp: 'latest' }), now, grace);
    expect(iso(latest.enqueue)).toEqual(['2026-11-30T09:09:00.000Z']);
    expect(latest.coalesced).toBe(9);
    const all = decide(plan, base({ catchUp: 'all' }), now, grace);
    expect(all.enqueue).toHaveLength(10);
    expect(all.enqueue[0]!.toISOString()).toBe('2026-11-30T09:00:00.000Z');
    expect(all.next?.toISOString()).toBe('2026-11-30T09:10:00.000Z');
  });

  it('catch_up none: a lone occurrence older than the grace is missed', () => {
    const daily = cronPlan('30 2 * * *', 'UTC');
    const d = decide(
      daily,
      base({ catchUp: 'none', nextRunAt: t('2026-11-30T02:30:00Z') }),
      t('2026-11-30T05:00:00Z'),
      grace,
    );
    expect(d.enqueue).toEqual([]);
    expect(d.missed).toBe(1);
    expect(d.next?.toISOString()).toBe('2026-12-01T02:30:00.000Z');
  });

  it(`catch_up all is bounded: the latest ${CATCH_UP_ALL_MAX}, the older ones missed`, () => {
    const d = decide(plan, base({ catchUp: 'all' }), t('2026-11-30T12:19:30Z'), grace); // 200 due
    expect(d.enqueue).toHaveLength(CATCH_UP_ALL_MAX);
    expect(d.enqueue[0]!.toISOString()).toBe('2026-11-30T10:40:00.000Z');
    expect(d.missed).toBe(100);
  });

  it('a very long outage is counted, not listed one by one (a per-second cron after a day)', () => {
    const perSecond = cronPlan('* * * * * *', 'UTC');
    const d = decide(
      perSecond,
      base({ catchUp: 'all', nextRunAt: t('2026-11-29T09:00:00Z') }),
      t('2026-11-30T09:00:00Z'),
      grace,
    );
    expect(d.enqueue).toHaveLength(CATCH_UP_ALL_MAX);
    expect(d.enqueue.at(-1)!.toISOString()).toBe('2026-11-30T09:00:00.000Z');
    expect(d.missed + d.enqueue.length).toBe(86_401);
  });

  it('overlap skip: nothing while the previous job is live, at most one otherwise', () => {
    const now = t('2026-11-30T09:04:30Z');
    const held = decide(plan, base({ overlap: 'skip', previousJobLive: true }), now, grace);
    expect(held.enqueue).toEqual([]);
    expect(held.skipped).toBe(1);
    expect(held.coalesced).toBe(4);
    const all = decide(plan, base({ overlap: 'skip', catchUp: 'all' }), now, grace);
    expect(iso(all.enqueue)).toEqual(['2026-11-30T09:00:00.000Z']);
    expect(all.skipped).toBe(4);
  });
});
