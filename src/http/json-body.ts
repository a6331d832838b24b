import { parseExact } from '../json/exact.js';
import { MAX_JSON_DEPTH } from './json-input.js';
import { ProblemError } from './problem.js';

/**
 * Nesting allowed in a whole request body: twice a payload's limit, so a payload one level too deep
 * still reaches the field check (which names the field), while a body of a million brackets is
 * refused after reading a few hundred bytes instead of being parsed into millions of objects.
 */
export const BODY_MAX_DEPTH = 2 * MAX_JSON_DEPTH;

/**
 * Parse a JSON request body. One cheap pass over the text comes first: it refuses nesting deeper
 * than BODY_MAX_DEPTH before JSON.parse allocates anything, and notices numbers that a double
 * cannot hold (16 or more digits, or an exponent), so that only those bodies pay for the exact
 * parse (json/exact.ts). JSON.parse keeps a `__proto__` key as an ordinary property, so payloads
 * that use it are accepted and stored as sent.
 */
export function parseJsonBody(text: string): unknown {
  if (text.length === 0) throw malformed('the body is empty');
  const scan = scanJson(text);
  if (scan === 'too_deep') {
    const message = `must not nest arrays and objects deeper than ${BODY_MAX_DEPTH} levels`;
    throw new ProblemError('validation_failed', `body ${message}`, { errors: [{ field: 'body', message }] });
  }
  try {
    return scan === 'long_numbers' ? parseExact(text) : JSON.parse(text);
  } catch (err) {
    throw malformed((err as Error).message);
  }
}

const malformed = (why: string) =>
  new ProblemError('malformed_json', `request body is not valid JSON: ${why}`);

/**
 * Depth and number check in one pass. It does not validate the JSON (JSON.parse does); it only
 * tracks strings, so brackets and digits inside them do not count.
 */
function scanJson(text: string): 'ok' | 'too_deep' | 'long_numbers' {
  let depth = 0;
  let longNumbers = false;
  let digits = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c >= 0x30 && c <= 0x39) {
      if (++digits >= 16) longNumbers = true;
      continue;
    }
    // A decimal point continues the number: significant digits on both sides count together.
    if (c === 0x2e /* . */) continue;
    digits = 0;
    if (c === 0x22 /* " */) {
      // Skip the string: to its closing quote, stepping over escapes.
      for (i++; i < text.length; i++) {
        const s = text.charCodeAt(i);
        if (s === 0x5c /* \ */) i++;
        else if (s === 0x22) break;
      }
    } else if (c === 0x5b || c === 0x7b /* [ { */) {
      if (++depth > BODY_MAX_DEPTH) return 'too_deep';
    } else if (c === 0x5d || c === 0x7d /* ] } */) {
      depth--;
    } else if (c === 0x65 || c === 0x45 /* e E outside a string: an exponent (or true/false) */) {
      const prev = text.charCodeAt(i - 1);
      if (prev >= 0x30 && prev <= 0x39) longNumbers = true;
    }
  }
  return longNumbers ? 'long_numbers' : 'ok';
}
