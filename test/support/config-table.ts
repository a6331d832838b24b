import { settings } from '../../src/config.js';

function formatDefault(value: unknown): string {
  return value === undefined ? '(unset)' : `\`${String(value)}\``;
}

/** The README's configuration table, one row per setting in src/config.ts. */
export function configTableRows(): string[] {
  return Object.values(settings).map(
    (s) => `| \`${s.env}\` | ${formatDefault(s.default)} | ${s.unit} | ${s.doc} |`,
  );
}
