/**
 * A value as an error message shows it: one line of at most `max` characters, a string as it is and
 * anything else as the start of its JSON. Error messages quote what a client sent, and a client can
 * send anything a parser builds: nesting a million levels deep (JSON.stringify recurses, and its
 * stack overflow once turned a bad request into a 500), a 10 MB string, or, inside the process,
 * cycles, BigInts, symbols and objects whose getters or toJSON throw. So the preview is written
 * iteratively and stops once it has `max` characters: its cost is bounded by what it prints, never by
 * the value, and it reads own enumerable properties only, calling no toJSON or toString.
 */
export function preview(value: unknown, max = 80): string {
  let text: string;
  try {
    text = typeof value === 'string' ? value.slice(0, max + 1) : startOfJson(value, max + 1);
  } catch {
    // A proxy whose every trap throws, say: say so rather than fail the error being built.
    text = '(a value that cannot be shown)';
  }
  const line = text.replace(/[\r\n]+/g, ' ');
  return line.length > max ? `${line.slice(0, max - 3)}...` : line;
}

/** One open array or object: its closing bracket and what is left to write of it. */
interface Open {
  close: string;
  next: () => [key: string | undefined, value: unknown] | undefined;
  first: boolean;
}

/** JSON-like text of `value`, cut once it is at least `limit` characters long. */
function startOfJson(value: unknown, limit: number): string {
  const text = scalar(value, limit);
  if (text !== undefined) return text;
  let out = '';
  const stack: Open[] = [];
  let pending: object | undefined = value as object;
  while (out.length < limit) {
    if (pending !== undefined) {
      const open = opened(pending);
      out += open.close === ']' ? '[' : '{';
      stack.push(open);
      pending = undefined;
      continue;
    }
    const top = stack.at(-1);
    if (!top) break;
    const entry = top.next();
    if (!entry) {
      out += top.close;
      stack.pop();
      continue;
    }
    const [key, item] = entry;
    if (!top.first) out += ',';
    top.first = false;
    if (key !== undefined) out += `${JSON.stringify(key.slice(0, limit))}:`;
    const text = scalar(item, limit);
    if (text === undefined) pending = item as object;
    else out += text;
  }
  return out;
}

/** A value that is not an array or object, as text; undefined for an array or object. */
function scalar(value: unknown, limit: number): string | undefined {
  if (value === THREW) return '(a getter that threw)';
  switch (typeof value) {
    case 'string':
      // Cut before escaping: a 10 MB string costs no more than a short one.
      return JSON.stringify(value.slice(0, limit));
    case 'object':
      if (value === null) return 'null';
      // JSON.rawJSON (exact numbers, json/exact.ts): the number as the client wrote it.
      if (isRawJson(value)) return String((value as { rawJSON: unknown }).rawJSON).slice(0, limit);
      return undefined;
    case 'bigint':
      return `${value}n`.slice(0, limit);
    case 'symbol':
      // String() of a symbol is its description, and unlike a template literal it does not throw.
      return String(value).slice(0, limit);
    case 'function':
      return '(a function)';
    case 'undefined':
      return 'undefined';
    default:
      return String(value);
  }
}

function isRawJson(value: object): boolean {
  return (JSON as { isRawJSON?: (v: unknown) => boolean }).isRawJSON?.(value) === true;
}

function opened(value: object): Open {
  if (Array.isArray(value)) {
    let i = 0;
    return {
      close: ']',
      first: true,
      next: () => (i < value.length ? [undefined, read(value, String(i++))] : undefined),
    };
  }
  const keys = Object.keys(value);
  let i = 0;
  return {
    close: '}',
    first: true,
    next: () => {
      if (i >= keys.length) return undefined;
      const key = keys[i++]!;
      return [key, read(value, key)];
    },
  };
}

/** A property's value; a getter that throws shows as a placeholder. */
function read(value: object, key: string): unknown {
  try {
    return (value as Record<string, unknown>)[key];
  } catch {
    return THREW;
  }
}

const THREW = Symbol('(a getter that threw)');
