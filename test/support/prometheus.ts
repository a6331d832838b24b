/** Reads one sample from Prometheus text: metricValue(text, 'name', { label: 'v' }). */
export function metricValue(
  text: string,
  name: string,
  labels: Record<string, string> = {},
): number | undefined {
  for (const line of text.split('\n')) {
    if (line.startsWith('#')) continue;
    const match = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (.+)$/.exec(line);
    if (!match || match[1] !== name) continue;
    const got = Object.fromEntries(
      [...(match[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((m) => [m[1], m[2]]),
    );
    if (
      Object.entries(labels).every(([k, v]) => got[k] === v) &&
      Object.keys(got).length === Object.keys(labels).length
    ) {
      return Number(match[3]);
    }
  }
  return undefined;
}
