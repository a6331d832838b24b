import { parseExact } from './exact.js';

/**
 * How deep a document from outside may nest arrays and objects, and the checks that hold it there.
 * One limit for every document Baton reads: a native API body, an SQS request in either protocol,
 * JSON inside an SQS attribute, and the schedules file. Each is checked while it is read, before a
 * parser builds (or a recursive function walks) millions of levels: JSON.parse copes with such
 * nesting, but JSON.stringify, String() of an array and YAML's composer recurse and overflow the
 * stack. Each protocol answers a document over the limit in its own shape.
 */

/** Deepest nesting of arrays and objects accepted in a payload, result or error detail. */
export const MAX_JSON_DEPTH = 64;

/**
 * Deepest nesting of a whole document: twice a field's limit, so a payload one level too deep still
 * reaches the field's own check (which names the field), while a body of a million brackets is
 * refused after reading a few hundred bytes.
 */
export const MAX_DOCUMENT_DEPTH = 2 * MAX_JSON_DEPTH;

/** A document nested deeper than MAX_DOCUMENT_DEPTH; `offset` is where in its text the limit was crossed. */
export class NestingError extends Error {
  constructor(readonly offset: number) {
    super(`must not nest arrays and objects deeper than ${MAX_DOCUMENT_DEPTH} levels`);
    this.name = 'NestingError';
  }
}

/**
 * Parse JSON text from outside: refuse nesting deeper than MAX_DOCUMENT_DEPTH (NestingError) before
 * JSON.parse allocates anything, and keep numbers a double cannot hold exactly (json/exact.ts),
 * paying for the exact parse only when the text has such a number. Malformed text throws
 * JSON.parse's SyntaxError. JSON.parse keeps a `__proto__` key as an ordinary property.
 */
export function parseJsonDocument(text: string): unknown {
  const scan = scanJson(text);
  if (scan.tooDeepAt !== undefined) throw new NestingError(scan.tooDeepAt);
  return scan.longNumbers ? parseExact(text) : JSON.parse(text);
}

/**
 * Depth and number check in one cheap pass over JSON text. It does not validate the JSON (JSON.parse
 * does); it only tracks strings, so brackets and digits inside them do not count. `longNumbers`: a
 * number of 16 or more significant digits, or with an exponent, which a double may not hold.
 */
export function scanJson(text: string): { tooDeepAt?: number; longNumbers: boolean } {
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
      if (++depth > MAX_DOCUMENT_DEPTH) return { tooDeepAt: i, longNumbers };
    } else if (c === 0x5d || c === 0x7d /* ] } */) {
      depth--;
    } else if (c === 0x65 || c === 0x45 /* e E outside a string: an exponent (or true/false) */) {
      const prev = text.charCodeAt(i - 1);
      if (prev >= 0x30 && prev <= 0x39) longNumbers = true;
    }
  }
  return { longNumbers };
}

/**
 * Where a value already built nests deeper than `limit`: the path to the first container beyond it
 * (`["schedules", "a", 0, ...]`), or undefined when it does not. For documents whose nesting is not
 * all in their text: YAML aliases nest one anchored value inside another, and may form a cycle (an
 * endless nesting). Iterative, and each array or object is measured once however often it is shared.
 */
export function pathDeeperThan(value: unknown, limit: number): (string | number)[] | undefined {
  /** Height of each container measured so far (1 for one holding only scalars). */
  const heights = new Map<object, number>();
  const path: (string | number)[] = [];
  const stack: { node: object; entries: [string | number, unknown][]; next: number; height: number }[] = [];
  const enter = (node: object) => {
    const entries: [string | number, unknown][] = Array.isArray(node)
      ? node.map((v, i) => [i, v])
      : Object.entries(node);
    stack.push({ node, entries, next: 0, height: 1 });
  };
  if (!isContainer(value)) return undefined;
  enter(value);
  while (stack.length > 0) {
    if (stack.length > limit) return path;
    const top = stack.at(-1)!;
    if (top.next === top.entries.length) {
      heights.set(top.node, top.height);
      stack.pop();
      path.pop();
      const parent = stack.at(-1);
      if (parent) parent.height = Math.max(parent.height, top.height + 1);
      continue;
    }
    const [key, child] = top.entries[top.next++]!;
    if (!isContainer(child)) continue;
    const known = heights.get(child);
    if (known !== undefined) {
      if (stack.length + known > limit) return [...path, key];
      top.height = Math.max(top.height, known + 1);
      continue;
    }
    // On the path already: a cycle, nesting without end.
    if (stack.some((open) => open.node === child)) return [...path, key];
    path.push(key);
    enter(child);
  }
  return undefined;
}

const isContainer = (value: unknown): value is object => typeof value === 'object' && value !== null;
