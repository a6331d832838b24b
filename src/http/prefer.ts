/**
 * The Prefer request header (RFC 7240). Baton honours one preference: `return=minimal` on a batch
 * enqueue, which answers each job's id and `created` only. A producer that sends thousands of jobs a
 * second and keeps only ids then pays neither for the full representation on the server (a
 * measurable share of its CPU per batch: docs/benchmarks.md) nor for parsing it on its own side.
 * Preferences Baton does not know are ignored, as the RFC asks.
 */
export function prefersMinimal(header: string | string[] | undefined): boolean {
  if (header === undefined) return false;
  const values = Array.isArray(header) ? header : [header];
  for (const value of values) {
    for (const preference of value.split(',')) {
      // A preference may carry parameters after ';' (none are defined for `return`).
      const [token] = preference.split(';');
      if (token!.replace(/\s+/g, '').toLowerCase() === 'return=minimal') return true;
    }
  }
  return false;
}
