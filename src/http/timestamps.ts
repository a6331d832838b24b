/**
 * Timestamps a client sends (`run_at`, `dead_since`) and the cursors Baton issues.
 *
 * The request schemas use the `date-time` format, and this module is that format's definition
 * (http/validation.ts installs it in place of ajv-formats' own), so that what the schema accepts is
 * exactly what Baton can store: RFC 3339 with any offset RFC 3339 allows (PostgreSQL refuses offsets
 * beyond ±15:59, so Baton converts to UTC itself before a time reaches SQL), between the years
 * 1970 and 9999 once in UTC. Leap seconds (`:60`) are refused: neither JavaScript nor PostgreSQL
 * keeps them.
 */

export const TIMESTAMP_MIN_YEAR = 1970;
export const TIMESTAMP_MAX_YEAR = 9999;
export const TIMESTAMP_MESSAGE = `must be an RFC 3339 date-time between ${TIMESTAMP_MIN_YEAR} and ${TIMESTAMP_MAX_YEAR}, such as 2026-01-01T00:00:00Z`;

const RFC3339 =
  /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(?:([Zz])|([+-])(\d{2}):(\d{2}))$/;

const daysIn = (year: number, month: number) => new Date(Date.UTC(year, month, 0)).getUTCDate();

/**
 * The same instant in UTC as `YYYY-MM-DDTHH:MM:SS.ffffffZ` (microseconds, PostgreSQL's precision;
 * further digits are cut), or undefined when the text is not a timestamp Baton accepts.
 */
export function toUtcTimestamp(text: string): string | undefined {
  const m = RFC3339.exec(text);
  if (!m) return undefined;
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number) as [
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  const fraction = (m[7] ?? '').padEnd(6, '0').slice(0, 6);
  const offsetHours = m[10] === undefined ? 0 : Number(m[10]);
  const offsetMinutes = m[11] === undefined ? 0 : Number(m[11]);
  if (month < 1 || month > 12 || day < 1 || day > daysIn(year, month)) return undefined;
  if (hour > 23 || minute > 59 || second > 59 || offsetHours > 23 || offsetMinutes > 59) return undefined;
  const offsetMs = (m[9] === '-' ? -1 : 1) * (offsetHours * 60 + offsetMinutes) * 60_000;
  const utc = new Date(Date.UTC(year, month - 1, day, hour, minute, second) - offsetMs);
  // Date.UTC maps years 0-99 to 1900-1999; the range check below refuses them either way.
  const y = utc.getUTCFullYear();
  if (year < 100 || y < TIMESTAMP_MIN_YEAR || y > TIMESTAMP_MAX_YEAR) return undefined;
  return `${utc.toISOString().slice(0, 19)}.${fraction}Z`;
}

/** The ajv format: a string toUtcTimestamp() accepts. */
export const isTimestamp = (text: string): boolean => toUtcTimestamp(text) !== undefined;
