import { describe, expect, it } from 'vitest';
import { isoTime } from '../../src/http/iso-time.js';

/** The API's times are written by isoTime (src/http/iso-time.ts): always exactly toISOString's text. */
describe('isoTime', () => {
  const same = (t: number) => {
    const d = new Date(t);
    expect(isoTime(d), String(t)).toBe(d.toISOString());
  };

  it('writes what toISOString writes at the edges of months, years, leap days and the range', () => {
    for (const text of [
      '1970-01-01T00:00:00.000Z',
      '1970-01-01T00:00:00.001Z',
      '1999-12-31T23:59:59.999Z',
      '2000-01-01T00:00:00.000Z',
      '2000-02-29T12:34:56.789Z',
      '2000-03-01T00:00:00.000Z',
      '2024-02-29T23:59:59.999Z',
      '2100-02-28T23:59:59.999Z',
      '2100-03-01T00:00:00.000Z',
      '2026-11-30T15:08:14.860Z',
      '9999-12-31T23:59:59.999Z',
    ]) {
      same(Date.parse(text));
    }
    for (let day = 0; day < 366 * 4; day++) {
      same(Date.UTC(2023, 0, 1) + day * 86_400_000 - 1);
      same(Date.UTC(2023, 0, 1) + day * 86_400_000);
    }
  });

  it('writes what toISOString writes for a million times across 1970 to 9999', () => {
    let seed = 17;
    const random = () => {
      seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648;
      return seed / 2_147_483_648;
    };
    const max = Date.parse('9999-12-31T23:59:59.999Z');
    // Compared without expect() per time (a million of them cost 14 s); every time that differs is
    // reported, with what each function wrote.
    const differ: string[] = [];
    const check = (t: number) => {
      const d = new Date(t);
      const ours = isoTime(d);
      if (ours !== d.toISOString()) differ.push(`${t}: ${ours} against ${d.toISOString()}`);
    };
    for (let i = 0; i < 1_000_000; i++) check(Math.floor(random() * random() * max));
    for (let i = 0; i < 100_000; i++) check(Date.now() + Math.floor((random() - 0.5) * 1e10));
    expect(differ).toEqual([]);
  });

  it('leaves times outside the range, and invalid ones, to toISOString', () => {
    same(-1);
    same(Date.parse('0099-06-01T00:00:00Z'));
    same(Date.parse('+010000-01-01T00:00:00Z'));
    expect(() => isoTime(new Date(Number.NaN))).toThrow(RangeError);
  });
});
