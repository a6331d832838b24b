import pg from 'pg';

/** OID of timestamptz. */
export const TIMESTAMPTZ_OID = 1184;

const slowParse = pg.types.getTypeParser(TIMESTAMPTZ_OID, 'text') as (text: string) => Date;

/**
 * The timestamptz type parser for node-postgres: the same Date as pg's own parser (postgres-date),
 * faster for the common case. Every claim and batch ack reads several timestamps per job, and pg's
 * parser runs a regular expression and builds the Date field by field for each; in a UTC session
 * PostgreSQL prints them as `2026-11-30 12:16:32.123456+00` (DateStyle ISO, which node-postgres
 * requires anyway), which this reads digit by digit. Anything else (another time zone's offset,
 * no fraction digits or a different number of them is fine, BC dates, infinity, years before 100 or past 9999)
 * goes to pg's parser.
 */
export function parseTimestamptz(text: string): Date {
  const n = text.length;
  // "YYYY-MM-DD HH:MM:SS" + optional ".f{1,6}" + "+00"
  if (n < 22 || n > 29 || text.charCodeAt(n - 3) !== 0x2b /* + */ || text.charCodeAt(n - 2) !== 0x30) {
    return slowParse(text);
  }
  if (text.charCodeAt(n - 1) !== 0x30 || text.charCodeAt(4) !== 0x2d || text.charCodeAt(10) !== 0x20) {
    return slowParse(text);
  }
  const year = digits(text, 0, 4);
  const month = digits(text, 5, 2);
  const day = digits(text, 8, 2);
  const hour = digits(text, 11, 2);
  const minute = digits(text, 14, 2);
  const second = digits(text, 17, 2);
  let ms = 0;
  if (n > 22) {
    // ".f" to ".ffffff": milliseconds are the first three digits (the Date keeps no more; pg's own
    // parser also drops the rest rather than rounding).
    if (text.charCodeAt(19) !== 0x2e /* . */) return slowParse(text);
    const fraction = n - 23;
    if (fraction < 1) return slowParse(text);
    const used = Math.min(fraction, 3);
    ms = digits(text, 20, used);
    if (ms < 0 || (fraction > 3 && digits(text, 23, fraction - 3) < 0)) return slowParse(text);
    if (used === 1) ms *= 100;
    else if (used === 2) ms *= 10;
  }
  if ((year | month | day | hour | minute | second) < 0 || year < 100 || month < 1 || day < 1) {
    return slowParse(text);
  }
  return new Date(Date.UTC(year, month - 1, day, hour, minute, second, ms));
}

/** The decimal number in text[at, at + count), or -1 when a character is not a digit. */
function digits(text: string, at: number, count: number): number {
  let value = 0;
  for (let i = at; i < at + count; i++) {
    const d = text.charCodeAt(i) - 0x30;
    if (d < 0 || d > 9) return -1;
    value = value * 10 + d;
  }
  return value;
}
