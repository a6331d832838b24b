import { readFileSync, statSync } from 'node:fs';
import { Lexer, Parser, parse as parseYaml } from 'yaml';
import { MAX_DOCUMENT_DEPTH, NestingError, parseJsonDocument, pathDeeperThan } from '../json/nesting.js';
import { preview } from '../json/preview.js';

/**
 * The schedules file (BATON_SCHEDULES_FILE) read as a document, JSON or YAML, under the limits every
 * document from outside has: at most BATON_BODY_LIMIT_BYTES, and nesting at most the one document
 * limit (json/nesting.ts), checked while it is parsed. A file is the operator's, not a stranger's,
 * but a generated or pasted file can be anything, and a file over a limit must stop the start with
 * a line that says where, not with a stack overflow in YAML's composer or JSON.stringify.
 */

/**
 * Most alias expansions a YAML file may make (the yaml package's default, stated so that it stays
 * bounded): an alias stands for its anchor's whole value, so a few lines of aliases of aliases can
 * describe billions of nodes ("billion laughs").
 */
const MAX_YAML_ALIASES = 100;

/** The file's document; errors say what is wrong and where (startup-inputs.ts prefixes the variable's name). */
export function readSchedulesDocument(path: string, maxBytes: number): unknown {
  const text = readBounded(path, maxBytes);
  const json = /\.json$/i.test(path);
  let doc: unknown;
  try {
    if (!json) checkYamlNesting(text);
    doc = json
      ? parseJsonDocument(text)
      : parseYaml(text, { uniqueKeys: true, maxAliasCount: MAX_YAML_ALIASES });
  } catch (err) {
    if (err instanceof NestingError)
      throw new Error(`${path}, ${lineAndColumn(text, err.offset)}: ${err.message}`);
    throw new Error(`is not valid ${json ? 'JSON' : 'YAML'}: ${(err as Error).message}`);
  }
  // Aliases nest an anchor's value wherever they stand, deeper than the text shows, or in a cycle.
  const deep = json ? undefined : pathDeeperThan(doc, MAX_DOCUMENT_DEPTH);
  if (deep) {
    throw new Error(
      `${path}, at ${shownPath(deep)}: must not nest arrays and objects deeper than ${MAX_DOCUMENT_DEPTH} ` +
        'levels (counting what its aliases stand for)',
    );
  }
  return doc;
}

function readBounded(path: string, maxBytes: number): string {
  let size: number;
  try {
    size = statSync(path).size;
  } catch (err) {
    throw new Error(`cannot be read: ${(err as Error).message}`);
  }
  if (size > maxBytes) {
    throw new Error(`${path} is ${size} bytes; the limit is BATON_BODY_LIMIT_BYTES (${maxBytes})`);
  }
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    throw new Error(`cannot be read: ${(err as Error).message}`);
  }
}

/**
 * Refuse YAML nested deeper than the limit while its text is parsed, before the yaml package's
 * composer (which recurses) builds anything. The YAML parser's own stack holds one entry per open
 * mapping, list or flow collection (block nesting by indentation, `- - - x` and `[[[x]]]` alike), so
 * its depth is the document's; it is read after every token, and only counted once it could exceed.
 */
function checkYamlNesting(text: string): void {
  const parser = new Parser();
  for (const token of new Lexer().lex(text)) {
    const offset = parser.offset;
    // Documents are built again by parse(); this pass only watches the stack.
    for (const _ of parser.next(token));
    if (parser.stack.length > MAX_DOCUMENT_DEPTH && collectionsOn(parser.stack) > MAX_DOCUMENT_DEPTH) {
      throw new NestingError(offset);
    }
  }
}

const collectionsOn = (stack: Parser['stack']) =>
  stack.filter((t) => t.type === 'block-map' || t.type === 'block-seq' || t.type === 'flow-collection')
    .length;

function lineAndColumn(text: string, offset: number): string {
  const before = text.slice(0, offset);
  const line = before.split('\n').length;
  return `line ${line}, column ${offset - before.lastIndexOf('\n')}`;
}

/** `schedules.nightly.payload.0.0...`: where nesting went too deep, its first steps. */
function shownPath(path: (string | number)[]): string {
  const shown = path.slice(0, 8).map((part) => preview(String(part), 40));
  return `${shown.join('.')}${path.length > 8 ? '...' : ''}`;
}
