import { fmt, max, median, min, ratios } from './stats.js';

/**
 * Results of a bench run: each scenario reports metrics, each metric one value per round for each
 * system measured, and target checks. Printed as plain tables and written as JSON and Markdown.
 */

export const BATON = 'Baton';
/** Baton with tracing on (spans to an OTLP sink in the bench process: BenchContext.batonTraced). */
export const BATON_TRACED = 'Baton traced';
/**
 * Baton with tracing off whose jobs each carry a producer's traceparent: what carrying a trace
 * context costs without spans (BATON_TRACED's jobs carry Baton's, as large).
 */
export const BATON_CARRYING = 'Baton carrying traces';

export interface Metric {
  id: string;
  title: string;
  unit: string;
  better: 'higher' | 'lower';
  /** System name -> one value per round, in round order (rounds interleave the systems). */
  series: Record<string, number[]>;
  /** Ratios are Baton / peer per round; set false where a ratio means nothing. */
  ratios?: boolean;
  /** The series the ratios are of (another Baton variant, say); default Baton. */
  baseline?: string;
}

export interface Check {
  target: string;
  met: boolean;
  detail: string;
}

export interface ScenarioResult {
  id: string;
  title: string;
  /** How it was run: sizes, concurrency, configurations. */
  setup: string[];
  metrics: Metric[];
  checks: Check[];
  /** Extra Markdown (e.g. a table of EXPLAIN figures), printed after the metrics. */
  notes?: string[];
  /** Anything else worth keeping (plans, CPU splits, raw samples). */
  details?: Record<string, unknown>;
}

export function summary(values: number[]) {
  return { median: median(values), min: min(values), max: max(values), n: values.length };
}

/** Baton/peer per round, for each peer of the metric. */
export function peerRatios(metric: Metric): Record<string, number[]> {
  const base = metric.baseline ?? BATON;
  const baton = metric.series[base];
  const out: Record<string, number[]> = {};
  if (!baton || metric.ratios === false) return out;
  for (const [system, values] of Object.entries(metric.series)) {
    if (system !== base) out[system] = ratios(baton, values);
  }
  return out;
}

function ratioCell(r: number[] | undefined): string {
  if (!r || r.length === 0) return '';
  return `${fmt(median(r), 3)}× (${r.map((x) => fmt(x, 3)).join(', ')})`;
}

function rows(metric: Metric): string[][] {
  const r = peerRatios(metric);
  return Object.entries(metric.series)
    .filter(([, values]) => values.length > 0)
    .map(([system, values]) => {
      const s = summary(values);
      return [system, fmt(s.median), `${fmt(s.min)} – ${fmt(s.max)}`, ratioCell(r[system])];
    });
}

const head = (metric: Metric) => [
  'system',
  'median',
  'min – max',
  `${metric.baseline ?? BATON}/peer: median (per round)`,
];

export function markdown(result: ScenarioResult): string {
  const out: string[] = [`### ${result.title}`, ''];
  for (const line of result.setup) out.push(`- ${line}`);
  out.push('');
  for (const metric of result.metrics) {
    out.push(`**${metric.title}** (${metric.unit}, ${metric.better} is better)`, '');
    const HEAD = head(metric);
    out.push(`| ${HEAD.join(' | ')} |`, `| ${HEAD.map(() => '---').join(' | ')} |`);
    for (const row of rows(metric)) out.push(`| ${row.join(' | ')} |`);
    out.push('');
  }
  if (result.notes) out.push(...result.notes, '');
  if (result.checks.length > 0) {
    out.push('| target | met | measured |', '| --- | --- | --- |');
    for (const c of result.checks) out.push(`| ${c.target} | ${c.met ? 'yes' : '**no**'} | ${c.detail} |`);
    out.push('');
  }
  return out.join('\n');
}

export function plain(result: ScenarioResult): string {
  const out: string[] = [`== ${result.title}`];
  for (const metric of result.metrics) {
    out.push(`  ${metric.title} [${metric.unit}, ${metric.better} is better]`);
    const table = rows(metric);
    const HEAD = head(metric);
    const widths = HEAD.map((h, i) => Math.max(h.length, ...table.map((r) => r[i]!.length)));
    const line = (cells: string[]) => `    ${cells.map((c, i) => c.padEnd(widths[i]!)).join('  ')}`.trimEnd();
    out.push(line(HEAD));
    for (const row of table) out.push(line(row));
  }
  if (result.notes) out.push(...result.notes.map((n) => `  ${n.replaceAll('\n', '\n  ')}`));
  for (const c of result.checks) out.push(`  [${c.met ? 'MET ' : 'MISS'}] ${c.target}: ${c.detail}`);
  return out.join('\n');
}

/** A check that Baton's median reaches `factor` × the reference's median (or stays under, for "lower"). */
export function ratioCheck(
  metric: Metric,
  peer: string,
  factor: number,
  target: string,
  base = BATON,
): Check {
  const baton = median(metric.series[base] ?? []);
  const other = median(metric.series[peer] ?? []);
  const ratio = baton / other;
  const met = metric.better === 'higher' ? ratio >= factor : ratio <= factor;
  return {
    target,
    met,
    detail: `${base} ${fmt(baton)} vs ${peer} ${fmt(other)} ${metric.unit}: ${fmt(ratio)}× (medians)`,
  };
}
