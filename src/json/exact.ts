/**
 * JSON that keeps numbers exactly.
 *
 * Payloads come from every language. A Go or Java producer may send an int64 id such as
 * 9007199254740993, which a JavaScript number cannot hold (it becomes ...992), or a value such as
 * 1e400 (it becomes Infinity, then null). PostgreSQL's jsonb stores numbers as `numeric`, exactly.
 * So Baton parses such numbers as `JSON.rawJSON(sourceText)`: JSON.stringify writes them back as
 * they came, and the stored job, the claim and GET all show the number the producer sent.
 *
 * The exact parse uses a reviver, which is several times slower than a plain JSON.parse, so it runs
 * only when the text has a number that could lose precision (16 or more digits, or an exponent).
 * Numbers that a double holds exactly stay plain numbers, so `1.0` is still an integer to the
 * request schemas.
 */

// JSON.parse source text access (in Node 22+, not yet in TypeScript's lib).
declare global {
  interface JSON {
    rawJSON(text: string): unknown;
  }
}

/** Parse JSON text; numbers a double cannot hold exactly become raw JSON that serialises as given. */
export function parseExact(text: string): unknown {
  return JSON.parse(text, keepExactNumbers);
}

function keepExactNumbers(this: unknown, _key: string, value: unknown, context?: { source?: string }) {
  if (typeof value !== 'number' || context?.source === undefined) return value;
  return sameDecimal(String(value), context.source) ? value : JSON.rawJSON(context.source);
}

/** Text PostgreSQL printed for a json/jsonb value may hold a number beyond a double (numeric never prints exponents). */
const LONG_DIGITS = /\d{16}/;

/** The jsonb type parser for node-postgres: JSON.parse, exact when a long number is present. */
export function parseDatabaseJson(text: string): unknown {
  return LONG_DIGITS.test(text) ? parseExact(text) : JSON.parse(text);
}

const DECIMAL = /^(-?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/;

/**
 * Whether two JSON number texts denote the same decimal value ("1.50" and "1.5", "1e3" and "1000",
 * "-0" and "0"), compared as sign, significant digits and exponent.
 */
export function sameDecimal(a: string, b: string): boolean {
  const x = normalise(a);
  const y = normalise(b);
  return x !== undefined && x === y;
}

function normalise(text: string): string | undefined {
  const m = DECIMAL.exec(text);
  if (!m) return undefined;
  const [, sign, whole, fraction = '', exponent = '0'] = m;
  let digits = `${whole}${fraction}`.replace(/^0+/, '');
  if (digits === '') return '0';
  let exp = BigInt(exponent) - BigInt(fraction.length);
  const trimmed = digits.replace(/0+$/, '');
  exp += BigInt(digits.length - trimmed.length);
  digits = trimmed;
  return `${sign}${digits}e${exp}`;
}
