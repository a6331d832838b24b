import { MAX_JSON_DEPTH } from '../json/nesting.js';
import { ProblemError } from './problem.js';

/**
 * Serialise a client's JSON value for storage as jsonb, rejecting what PostgreSQL would refuse (so
 * bad input is a 400 naming the field, never a 500 from the database):
 * - the NUL character (`\u0000`) anywhere in a string or key: jsonb cannot store it;
 * - lone UTF-16 surrogates (`\ud800` without its pair): not valid Unicode;
 * - nesting deeper than MAX_JSON_DEPTH.
 * And with a size limit, a value whose JSON text is larger is a 413 payload_too_large.
 */
export function jsonText(value: unknown, field: string, maxBytes?: number): string {
  let text: string;
  try {
    text = JSON.stringify(value === undefined ? null : value);
  } catch (err) {
    // Nesting deep enough to exhaust the stack (JSON.parse accepts it; JSON.stringify recurses).
    if (err instanceof RangeError) throw tooDeep(field);
    throw err;
  }
  if (maxBytes !== undefined && text.length > maxBytes / 3) {
    // A JS string's UTF-8 size is at most 3 bytes per code unit; only measure when it could matter.
    const bytes = Buffer.byteLength(text);
    if (bytes > maxBytes) {
      throw new ProblemError(
        'payload_too_large',
        `${field} is ${bytes} bytes of JSON; the limit is ${maxBytes}`,
      );
    }
  }
  const problem = scan(text);
  if (problem)
    throw new ProblemError('validation_failed', `${field} ${problem}`, {
      errors: [{ field, message: problem }],
    });
  return text;
}

const tooDeep = (field: string) => {
  const message = `must not nest arrays and objects deeper than ${MAX_JSON_DEPTH} levels`;
  return new ProblemError('validation_failed', `${field} ${message}`, { errors: [{ field, message }] });
};

/** One pass over JSON text produced by JSON.stringify. */
function scan(text: string): string | undefined {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c /* \ */) {
        const next = text.charCodeAt(i + 1);
        if (next === 0x75 /* u */) {
          const hex = text.slice(i + 2, i + 6).toLowerCase();
          if (hex === '0000') return 'must not contain the NUL character (\\u0000)';
          // JSON.stringify escapes a surrogate only when it is unpaired.
          if (hex >= 'd800' && hex <= 'dfff') return 'must not contain an unpaired UTF-16 surrogate';
          i += 5;
        } else i += 1;
      } else if (c === 0x22 /* " */) inString = false;
      continue;
    }
    if (c === 0x22) inString = true;
    else if (c === 0x7b || c === 0x5b /* { [ */) {
      if (++depth > MAX_JSON_DEPTH)
        return `must not nest arrays and objects deeper than ${MAX_JSON_DEPTH} levels`;
    } else if (c === 0x7d || c === 0x5d) depth--;
  }
  return undefined;
}
