import { settings } from '../../src/config/settings.js';

function formatDefault(value: unknown): string {
  if (value === undefined) return '(unset)';
  if (Array.isArray(value)) return value.length === 0 ? '(none)' : `\`${value.join(',')}\``;
  if (typeof value === 'object' && value !== null) {
    const entries = Object.entries(value);
    return entries.length === 0 ? '(none)' : `\`${entries.map(([k, v]) => `${k}=${v}`).join(',')}\``;
  }
  return `\`${String(value)}\``;
}

/** The README's configuration table, one row per setting in src/config/settings.ts. */
export function configTableRows(): string[] {
  return Object.values(settings).map(
    (s) => `| \`${s.env}\` | ${formatDefault(s.default)} | ${s.unit} | ${s.doc} |`,
  );
}
