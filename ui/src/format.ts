/** How figures are written on the page. */

const number = new Intl.NumberFormat('en');

export const count = (n: number): string => number.format(n);

/** A duration in ms, short: 850 ms, 12 s, 4 min, 3 h, 2 d. */
export function duration(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = ms / 1000;
  if (s < 60) return `${Math.round(s)} s`;
  if (s < 3600) return `${Math.round(s / 60)} min`;
  if (s < 48 * 3600) return `${Math.round(s / 3600)} h`;
  return `${Math.round(s / 86400)} d`;
}

/** A duration in ms, exactly (a configured period, not a measurement): 100 ms, 1.5 s, 1 min, 2 h, 1 d. */
export function period(ms: number): string {
  for (const [unit, size] of [
    ['d', 86_400_000],
    ['h', 3_600_000],
    ['min', 60_000],
  ] as const) {
    if (ms >= size && ms % size === 0) return `${count(ms / size)} ${unit}`;
  }
  return ms >= 1000 ? `${count(ms / 1000)} s` : `${count(ms)} ms`;
}

/** A rate limit: "100 per 1 min"; null: "none". */
export const rate = (r: { limit: number; period_ms: number } | null): string =>
  r === null ? 'none' : `${count(r.limit)} per ${period(r.period_ms)}`;

/** A concurrency limit: "5 at once"; null: "none". */
export const atOnce = (n: number | null): string => (n === null ? 'none' : `${count(n)} at once`);

/** How far `iso` is from `now` (ms since the epoch, the server's clock): "in 4 min", "12 s ago". */
export function relative(iso: string | null | undefined, now: number): string {
  if (!iso) return '';
  const ms = Date.parse(iso) - now;
  // Within a second either way is now: clocks and readings are not finer than that.
  if (Math.abs(ms) < 1000) return 'just now';
  return ms >= 0 ? `in ${duration(ms)}` : `${duration(-ms)} ago`;
}

/** A timestamp in the viewer's time zone, to the second. */
export function time(iso: string | null | undefined): string {
  if (!iso) return '—';
  return new Date(iso).toLocaleString('en-GB', { dateStyle: 'medium', timeStyle: 'medium' });
}

/** When a count was taken: the time of day to the second ("09:41:05"), with the date unless today. */
export function clock(iso: string | null | undefined): string {
  if (!iso) return '—';
  const at = new Date(iso);
  return at.toDateString() === new Date().toDateString() ? at.toLocaleTimeString('en-GB') : time(iso);
}

export const percent = (fraction: number): string => `${(fraction * 100).toFixed(fraction < 0.1 ? 1 : 0)} %`;

export const plural = (n: number, one: string, many = `${one}s`): string =>
  `${count(n)} ${n === 1 ? one : many}`;

/** Any JSON value as indented text (shown in a <pre>, never parsed as HTML). */
export const json = (value: unknown): string => (value === undefined ? '' : JSON.stringify(value, null, 2));
