import { describe, expect, it } from 'vitest';
import { emptyWindow, rateRoom, recorded } from '../../src/jobs/rate-window.js';

const at = (ms: number) => new Date(1_800_000_000_000 + ms);

describe('a rate window (100 buckets per period)', () => {
  it('lets `limit` jobs through in any window of the period, and tells when the next fits', () => {
    let w = emptyWindow();
    w = recorded(w, 1000, at(0), 6);
    w = recorded(w, 1000, at(300), 4);
    expect(rateRoom(w, 10, 1000, at(400))).toEqual({ room: 0, retryAfterMs: 610 });
    // The first bucket [0, 10) leaves the window once its end is a period old: at 1010.
    expect(rateRoom(w, 10, 1000, at(1009)).room).toBe(0);
    expect(rateRoom(w, 10, 1000, at(1010)).room).toBe(6);
    expect(rateRoom(w, 10, 1000, at(1310)).room).toBe(10);
  });

  it('keeps at most a period of buckets, merging claims in one bucket', () => {
    let w = emptyWindow();
    for (let t = 0; t < 5000; t += 3) w = recorded(w, 1000, at(t), 1);
    expect(w.times.length).toBeLessThanOrEqual(101);
    expect(w.counts.reduce((a, b) => a + b, 0)).toBeLessThanOrEqual(Math.ceil(1010 / 3));
  });

  it('never counts a claim out before its full period has passed', () => {
    let w = emptyWindow();
    w = recorded(w, 500, at(7), 1);
    for (let t = 7; t < 507; t++) expect(rateRoom(w, 1, 500, at(t)).room, `at ${t}`).toBe(0);
  });
});
