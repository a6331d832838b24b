import { MAX_DOCUMENT_DEPTH } from '../json/nesting.js';
import { preview } from '../json/preview.js';
import { invalidValue, SqsError } from './errors.js';
import type { Input } from './input.js';

/**
 * The query protocol (`Action=SendMessage&QueueUrl=...`, form-encoded, answered in XML): what the
 * AWS CLI and boto3 packaged by Debian 12 send (botocore 1.29), and older SDKs generally; newer
 * ones send the JSON protocol. Its parameters are flattened: lists and maps become numbered keys
 * (`AttributeName.1`, `Attribute.1.Name`/`Attribute.1.Value`,
 * `SendMessageBatchRequestEntry.2.MessageAttribute.1.Value.StringValue`). This module reshapes
 * them into the object the JSON protocol would have carried, so every action reads one shape.
 */

/** Most parameters a request may carry (a batch of 10 with 10 attributes each is under 600). */
const MAX_PARAMETERS = 5000;
/** Highest list index accepted (a batch holds at most 10 entries, a message 10 attributes). */
const MAX_INDEX = 1000;

/** Flattened list names and the JSON member each becomes. */
const LISTS: Record<string, string> = {
  AttributeName: 'AttributeNames',
  MessageAttributeName: 'MessageAttributeNames',
  MessageSystemAttributeName: 'MessageSystemAttributeNames',
  TagKey: 'TagKeys',
  SendMessageBatchRequestEntry: 'Entries',
  DeleteMessageBatchRequestEntry: 'Entries',
  ChangeMessageVisibilityBatchRequestEntry: 'Entries',
};

/** Members the JSON protocol carries as integers. */
const INTEGERS = new Set([
  'MaxNumberOfMessages',
  'VisibilityTimeout',
  'WaitTimeSeconds',
  'DelaySeconds',
  'MaxResults',
]);

export interface QueryRequest {
  action: string | undefined;
  input: Input;
}

/**
 * Parse a form-encoded query-protocol body into its action and a JSON-shaped input. Every parameter
 * of the protocol holds one value (lists are numbered), so one given twice (`QueueUrl=a&QueueUrl=b`,
 * or once in the URL and once in the body) is refused rather than the last one silently winning.
 */
export function parseQueryBody(body: string): QueryRequest {
  const tree = new Node();
  const seen = new Set<string>();
  let action: string | undefined;
  for (const [key, value] of formPairs(body)) {
    if (seen.has(key)) throw invalidValue(key, value, `${key} is given more than once`);
    seen.add(key);
    if (key === 'Action') action = value;
    else if (key !== 'Version') tree.set(pathOf(key), value, key);
  }
  // A request with no parameters but its action is an empty input, not a missing one.
  return { action, input: (tree.children.size === 0 ? {} : reshape(tree.toValue(), true)) as Input };
}

/**
 * A parameter name's parts (`Attribute.1.Name`: three). Each part is one level of the input built
 * from it, and the tree below is built and reshaped recursively, so a name may have no more parts
 * than the one document nesting limit allows (SQS's deepest has six). Split no further than that: a
 * name of a million dots costs no more than a short one.
 */
function pathOf(key: string): string[] {
  const parts = key.split('.', MAX_DOCUMENT_DEPTH + 1);
  if (parts.length > MAX_DOCUMENT_DEPTH) {
    throw new SqsError(
      'InvalidParameterValue',
      `parameter ${preview(key)} must not nest deeper than ${MAX_DOCUMENT_DEPTH} levels (parts between dots)`,
    );
  }
  return parts;
}

/**
 * The name-value pairs of an application/x-www-form-urlencoded text, strictly. URLSearchParams
 * passes a malformed escape through as text (`%zz` stays `%zz`, `%4` stays `%4`) and turns an escape
 * of bytes that are not UTF-8 into U+FFFD, so a value would silently differ from what the client
 * meant; decodeURIComponent refuses both, and so does this.
 */
function formPairs(body: string): [string, string][] {
  const pairs: [string, string][] = [];
  for (const part of body.split('&')) {
    if (part === '') continue;
    if (pairs.length === MAX_PARAMETERS) {
      throw new SqsError('InvalidParameterValue', `a request may carry at most ${MAX_PARAMETERS} parameters`);
    }
    const eq = part.indexOf('=');
    const rawKey = eq < 0 ? part : part.slice(0, eq);
    const key = formDecoded(rawKey, rawKey);
    pairs.push([key, formDecoded(eq < 0 ? '' : part.slice(eq + 1), key)]);
  }
  return pairs;
}

/** One name or value decoded (`+` is a space); a bad escape is refused naming the parameter. */
function formDecoded(text: string, parameter: string): string {
  try {
    return decodeURIComponent(text.replaceAll('+', ' '));
  } catch {
    const bad = /%(?![0-9A-Fa-f]{2})[^%]{0,2}/.exec(text)?.[0];
    throw invalidValue(
      parameter,
      text,
      bad === undefined
        ? 'its percent-escapes decode to bytes that are not UTF-8'
        : `${bad} is a malformed percent-escape (% must be followed by two hexadecimal digits)`,
    );
  }
}

/** A node of the flattened parameter tree: a leaf value, or children by name or 1-based index. */
class Node {
  value: string | undefined;
  readonly children = new Map<string, Node>();

  set(path: string[], value: string, key: string): void {
    let node: Node = this;
    for (const part of path) {
      // Object keys become property names below: refuse the ones that would reach a prototype.
      if (
        part === '' ||
        part === '__proto__' ||
        part === 'constructor' ||
        part === 'prototype' ||
        (/^\d+$/.test(part) && (Number(part) < 1 || Number(part) > MAX_INDEX))
      ) {
        throw new SqsError('InvalidParameterValue', `parameter ${preview(key)} is not well formed`);
      }
      let child = node.children.get(part);
      if (!child) {
        child = new Node();
        node.children.set(part, child);
      }
      node = child;
    }
    node.value = value;
    if (node.children.size > 0) throw conflict(key);
  }

  /** Plain data: a string, a list (children all numbered) or an object. */
  toValue(): unknown {
    if (this.children.size === 0) return this.value;
    if (this.value !== undefined) throw conflict([...this.children.keys()][0]!);
    const keys = [...this.children.keys()];
    if (keys.every((k) => /^\d+$/.test(k))) {
      return keys.sort((a, b) => Number(a) - Number(b)).map((k) => this.children.get(k)!.toValue());
    }
    if (keys.some((k) => /^\d+$/.test(k))) throw conflict(keys[0]!);
    return Object.fromEntries(keys.map((k) => [k, this.children.get(k)!.toValue()]));
  }
}

const conflict = (key: string) =>
  new SqsError('InvalidParameterValue', `parameter ${preview(key)} is given both as a value and as a list`);

/** Rename flattened members to their JSON names, fold Name/Value lists into maps, type integers. */
function reshape(value: unknown, top: boolean): unknown {
  if (Array.isArray(value)) return value.map((v) => reshape(v, false));
  if (typeof value !== 'object' || value === null) return value;
  const out: Record<string, unknown> = {};
  for (const [key, v] of Object.entries(value)) {
    if (key === 'Attribute') out.Attributes = nameValueMap(v, 'Name', 'Value', key);
    else if (key === 'Tag') out[top ? 'Tags' : key] = nameValueMap(v, 'Key', 'Value', key);
    else if (key === 'MessageAttribute' || key === 'MessageSystemAttribute') {
      out[`${key}s`] = attributeMap(v, key);
    } else if (Object.hasOwn(LISTS, key)) {
      out[LISTS[key]!] = v === '' ? [] : reshape(asList(v, key), false);
    } else if (INTEGERS.has(key) && typeof v === 'string' && /^-?\d{1,15}$/.test(v)) {
      out[key] = Number(v);
    } else out[key] = reshape(v, false);
  }
  // An empty list is sent as its JSON name with an empty value (botocore: `AttributeNames=`).
  for (const name of Object.values(LISTS)) if (out[name] === '') out[name] = [];
  return out;
}

function asList(value: unknown, key: string): unknown[] {
  if (!Array.isArray(value))
    throw new SqsError(
      'InvalidParameterValue',
      `parameter ${preview(key)} must be numbered (${preview(key)}.1)`,
    );
  return value;
}

/** `Attribute.1.Name=A&Attribute.1.Value=x` → `{A: 'x'}`. */
function nameValueMap(
  value: unknown,
  keyName: string,
  valueName: string,
  key: string,
): Record<string, unknown> {
  // Keys are the client's names: a map without a prototype keeps "__proto__" an ordinary key.
  const out: Record<string, unknown> = Object.create(null);
  if (value === '') return out;
  for (const entry of asList(value, key)) {
    const e = entry as Record<string, unknown> | undefined;
    const name = e?.[keyName];
    if (typeof name !== 'string') {
      throw new SqsError('InvalidParameterValue', `each ${key} needs a ${key}.N.${keyName}`);
    }
    out[name] = e?.[valueName] ?? '';
  }
  return out;
}

/** `MessageAttribute.1.Name=a&MessageAttribute.1.Value.StringValue=x&...` → `{a: {StringValue, DataType}}`. */
function attributeMap(value: unknown, key: string): Record<string, unknown> {
  const out: Record<string, unknown> = Object.create(null);
  for (const [name, v] of Object.entries(nameValueMap(value, 'Name', 'Value', key))) {
    if (typeof v !== 'object' || v === null) {
      throw new SqsError('InvalidParameterValue', `${key} ${name} needs a Value.DataType and a value`);
    }
    const { StringListValue, BinaryListValue, ...rest } = v as Record<string, unknown>;
    out[name] = {
      ...rest,
      ...(StringListValue !== undefined ? { StringListValues: StringListValue } : {}),
      ...(BinaryListValue !== undefined ? { BinaryListValues: BinaryListValue } : {}),
    };
  }
  return out;
}
