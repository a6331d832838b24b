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

/** A timestamp in the viewer's time zone, to the second. */
export function time(iso: string | null | undefined): string {
  if (!iso) return '—';
  return new Date(iso).toLocaleString('en-GB', { dateStyle: 'medium', timeStyle: 'medium' });
}

export const percent = (fraction: number): string => `${(fraction * 100).toFixed(fraction < 0.1 ? 1 : 0)} %`;

export const plural = (n: number, one: string, many = `${one}s`): string =>
  `${count(n)} ${n === 1 ? one : many}`;

/** Any JSON value as indented text (shown in a <pre>, never parsed as HTML). */
export const json = (value: unknown): string => (value === undefined ? '' : JSON.stringify(value, null, 2));
