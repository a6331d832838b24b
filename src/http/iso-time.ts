/**
 * `date.toISOString()`, written in JavaScript for the times the API answers with.
 *
 * V8's toISOString is slow for what it does, and the hot answers carry several times per job (a claimed
 * job three, an acked job four or five, an enqueued one two): in batched processing that was most of
 * the cost of writing the claim's answer (docs/benchmarks.md, "What was tried and what it gave", row
 * "isoTime"). This does the same calendar arithmetic, much faster. Times from 1970-01-01 to 9999-12-31
 * (every time Baton stores) are formatted here; anything else, an invalid Date included, goes to
 * toISOString itself, so the answer (or the RangeError) is always the same. test/http/iso-time.test.ts
 * compares the two over the whole range.
 */

const DAY_MS = 86_400_000;
/** 9999-12-31T23:59:59.999Z */
const MAX_MS = 253_402_300_799_999;

/** "00" to "99". */
const TWO = Array.from({ length: 100 }, (_, i) => (i < 10 ? `0${i}` : String(i)));

export function isoTime(date: Date): string {
  const t = date.getTime();
  if (!(t >= 0 && t <= MAX_MS)) return date.toISOString();
  const msOfDay = t % DAY_MS;
  // Civil date from days since 1970-01-01 (Howard Hinnant's days_from_civil, inverted), for days >= 0.
  const z = (t - msOfDay) / DAY_MS + 719_468;
  const era = Math.floor(z / 146_097);
  const dayOfEra = z - era * 146_097;
  const yearOfEra = Math.floor(
    (dayOfEra -
      Math.floor(dayOfEra / 1460) +
      Math.floor(dayOfEra / 36_524) -
      Math.floor(dayOfEra / 146_096)) /
      365,
  );
  const dayOfYear = dayOfEra - (365 * yearOfEra + Math.floor(yearOfEra / 4) - Math.floor(yearOfEra / 100));
  const mp = Math.floor((5 * dayOfYear + 2) / 153);
  const day = dayOfYear - Math.floor((153 * mp + 2) / 5) + 1;
  const month = mp < 10 ? mp + 3 : mp - 9;
  const year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0);
  const hour = Math.floor(msOfDay / 3_600_000);
  const minute = Math.floor(msOfDay / 60_000) % 60;
  const second = Math.floor(msOfDay / 1000) % 60;
  const ms = msOfDay % 1000;
  const fraction = ms < 10 ? `00${ms}` : ms < 100 ? `0${ms}` : String(ms);
  const yyyy = year >= 1000 ? String(year) : String(year).padStart(4, '0');
  return `${yyyy}-${TWO[month]}-${TWO[day]}T${TWO[hour]}:${TWO[minute]}:${TWO[second]}.${fraction}Z`;
}
