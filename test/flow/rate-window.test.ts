import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { useTestDatabase } from '../support/database.js';

/** baton.rate_room and baton.rate_recorded (migrations/0011_flow_budget.ts), as claims call them. */
const database = useTestDatabase();

const at = (ms: number) => new Date(1_800_000_000_000 + ms);

interface Window {
  times: Date[];
  counts: number[];
}
const empty = (): Window => ({ times: [], counts: [] });

async function recorded(w: Window, periodMs: number, when: Date, n: number): Promise<Window> {
  const { rows } = await sql<{ new_times: Date[]; new_counts: number[] }>`
    SELECT * FROM baton.rate_recorded(${w.times}::timestamptz[], ${w.counts}::integer[], ${periodMs}::integer,
                                      ${when}::timestamptz, ${n}::integer)`.execute(database.db);
  return { times: rows[0]!.new_times, counts: rows[0]!.new_counts };
}

async function rateRoom(w: Window, limit: number, periodMs: number, when: Date) {
  const { rows } = await sql<{ room: number; retry_after_ms: number | null }>`
    SELECT * FROM baton.rate_room(${w.times}::timestamptz[], ${w.counts}::integer[], ${limit}::integer,
                                  ${periodMs}::integer, ${when}::timestamptz)`.execute(database.db);
  const { room, retry_after_ms } = rows[0]!;
  return retry_after_ms === null ? { room } : { room, retryAfterMs: retry_after_ms };
}

describe('a rate window (100 buckets per period)', () => {
  it('lets `limit` jobs through in any window of the period, and tells when the next fits', async () => {
    let w = empty();
    w = await recorded(w, 1000, at(0), 6);
    w = await recorded(w, 1000, at(300), 4);
    expect(await rateRoom(w, 10, 1000, at(400))).toEqual({ room: 0, retryAfterMs: 610 });
    // The first bucket [0, 10) leaves the window once its end is a period old: at 1010.
    expect((await rateRoom(w, 10, 1000, at(1009))).room).toBe(0);
    expect((await rateRoom(w, 10, 1000, at(1010))).room).toBe(6);
    expect((await rateRoom(w, 10, 1000, at(1310))).room).toBe(10);
  });

  it('keeps at most a period of buckets, merging claims in one bucket', async () => {
    let w = empty();
    for (let t = 0; t < 5000; t += 3) w = await recorded(w, 1000, at(t), 1);
    expect(w.times.length).toBeLessThanOrEqual(101);
    expect(w.counts.reduce((a, b) => a + b, 0)).toBeLessThanOrEqual(Math.ceil(1010 / 3));
  });

  it('never counts a claim out before its full period has passed', async () => {
    let w = empty();
    w = await recorded(w, 500, at(7), 1);
    for (let t = 7; t < 507; t++) expect((await rateRoom(w, 1, 500, at(t))).room, `at ${t}`).toBe(0);
    expect((await rateRoom(w, 1, 500, at(510))).room).toBe(1);
  });

  it('puts a claim in the bucket of its time, at a millisecond, and records nothing for no jobs', async () => {
    const w = await recorded(empty(), 60_000, new Date(Date.UTC(2027, 0, 15, 8, 0, 0, 1_234)), 2);
    // 600 ms buckets: 08:00:01.234 falls in the one from 08:00:01.200.
    expect(w.times.map((t) => t.toISOString())).toEqual(['2027-01-15T08:00:01.200Z']);
    expect(await recorded(w, 60_000, new Date(Date.UTC(2027, 0, 15, 8, 0, 1, 500)), 0)).toEqual(w);
  });
});
