/** Small statistics over samples: median, min–max, percentiles, ratios per round. */

export function sorted(values: readonly number[]): number[] {
  return [...values].sort((a, b) => a - b);
}

/** Percentile by nearest rank (p in 0..100) of unsorted samples; NaN when there are none. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const s = sorted(values);
  const rank = Math.ceil((p / 100) * s.length);
  return s[Math.min(s.length - 1, Math.max(0, rank - 1))]!;
}

/** Median (mean of the two middle values for an even count). */
export function median(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN;
  const s = sorted(values);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

export function min(values: readonly number[]): number {
  return values.length === 0 ? Number.NaN : Math.min(...values);
}

export function max(values: readonly number[]): number {
  return values.length === 0 ? Number.NaN : Math.max(...values);
}

/** a[i] / b[i] for each round both have. */
export function ratios(a: readonly number[], b: readonly number[]): number[] {
  const n = Math.min(a.length, b.length);
  return Array.from({ length: n }, (_, i) => a[i]! / b[i]!);
}

/** Compact number for tables: 12345 -> "12,345", 1.234 -> "1.23", 0.01234 -> "0.0123". */
export function fmt(value: number, digits = 3): string {
  if (!Number.isFinite(value)) return 'n/a';
  const abs = Math.abs(value);
  if (abs >= 1000) return Math.round(value).toLocaleString('en-US');
  if (abs >= 100) return value.toFixed(0);
  if (abs === 0) return '0';
  return Number(value.toPrecision(digits)).toString();
}

/**
 * One markdown table row per series: its name, then the median over its runs of each column, in
 * the order given (the CPU tables of the scenarios: server, PostgreSQL, client per 1,000 jobs).
 */
export function medianRows<K extends string>(
  runsBySeries: Record<string, Record<K, number>[]>,
  columns: readonly K[],
): string[] {
  return Object.entries(runsBySeries).map(
    ([series, runs]) =>
      `| ${series} | ${columns.map((c) => fmt(median(runs.map((r) => r[c])))).join(' | ')} |`,
  );
}
