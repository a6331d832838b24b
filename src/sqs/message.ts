import { preview } from '../json/preview.js';
import { invalidValue, SqsError } from './errors.js';
import type { StoredAttribute } from './md5.js';

/**
 * What SQS accepts in a message: the characters of a body, and message attributes (at most 10; a
 * name of letters, digits, `_`, `-` and `.`; a type String, Number or Binary, with an optional
 * custom suffix; a non-empty value). The sizes of the body and the attributes (names, types and
 * values) count together against the message size limit.
 */

/** Largest message SQS accepts: body plus attributes. */
export const MAX_MESSAGE_BYTES = 262_144;
export const MAX_ATTRIBUTES = 10;

/**
 * SQS's character set for bodies and string values: #x9 | #xA | #xD | #x20 to #xD7FF |
 * #xE000 to #xFFFD | #x10000 to #x10FFFF. With the `u` flag an unpaired surrogate is a code point in
 * D800-DFFF and so outside the set, as are NUL and the other C0 controls (which PostgreSQL's jsonb
 * could not store anyway).
 */
const OUTSIDE_CHARSET = /[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\u{10000}-\u{10ffff}]/u;

export function checkBody(body: string): void {
  const bad = OUTSIDE_CHARSET.exec(body);
  if (bad) {
    const code = bad[0].codePointAt(0)!.toString(16);
    throw new SqsError(
      'InvalidMessageContents',
      `Invalid binary character '#x${code}' was found in the message body, the set of allowed characters is ` +
        '#x9 | #xA | #xD | #x20 to #xD7FF | #xE000 to #xFFFD | #x10000 to #x10FFFF',
    );
  }
}

const NAME = /^[A-Za-z0-9_.-]{1,256}$/;
const BASE_TYPES = ['String', 'Number', 'Binary'] as const;
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
/** A decimal number; SQS keeps 38 significant digits. */
const NUMBER = /^[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?$/;

export interface CheckedAttributes {
  attributes: Record<string, StoredAttribute>;
  /** Bytes of names, types and values, as SQS counts them against the message size. */
  bytes: number;
}

/** Validate a message's MessageAttributes (absent: none). */
export function checkMessageAttributes(value: unknown, parameter = 'MessageAttributes'): CheckedAttributes {
  // No prototype: an attribute may be called "__proto__" like any other name.
  const attributes: Record<string, StoredAttribute> = Object.create(null);
  if (value === undefined || value === null) return { attributes, bytes: 0 };
  if (typeof value !== 'object' || Array.isArray(value)) {
    throw invalidValue(parameter, value, 'must be a map of attribute names to values.');
  }
  const entries = Object.entries(value);
  if (entries.length > MAX_ATTRIBUTES) {
    throw new SqsError(
      'InvalidParameterValue',
      `Number of message attributes [${entries.length}] exceeds the allowed maximum [${MAX_ATTRIBUTES}].`,
    );
  }
  let bytes = 0;
  for (const [name, raw] of entries) {
    checkName(name);
    const attribute = checkValue(name, raw, 'Message (user) attribute');
    attributes[name] = attribute;
    bytes += Buffer.byteLength(name) + Buffer.byteLength(attribute.DataType) + valueBytes(attribute);
  }
  return { attributes, bytes };
}

/** MessageSystemAttributes: SQS accepts only AWSTraceHeader, a String. */
export function checkSystemAttributes(value: unknown): Record<string, StoredAttribute> {
  const attributes: Record<string, StoredAttribute> = Object.create(null);
  if (value === undefined || value === null) return attributes;
  if (typeof value !== 'object' || Array.isArray(value)) {
    throw invalidValue('MessageSystemAttributes', value, 'must be a map of attribute names to values.');
  }
  for (const [name, raw] of Object.entries(value)) {
    if (name !== 'AWSTraceHeader') {
      throw new SqsError(
        'InvalidParameterValue',
        `Message system attribute name '${preview(name)}' is invalid; the only one a message may be sent with is AWSTraceHeader.`,
      );
    }
    const attribute = checkValue(name, raw, 'Message system attribute');
    if (attribute.DataType !== 'String') {
      throw new SqsError(
        'InvalidParameterValue',
        'Message system attribute AWSTraceHeader must be of type String.',
      );
    }
    attributes[name] = attribute;
  }
  return attributes;
}

function checkName(name: string): void {
  const lower = name.toLowerCase();
  if (
    !NAME.test(name) ||
    name.startsWith('.') ||
    name.endsWith('.') ||
    name.includes('..') ||
    lower.startsWith('aws.') ||
    lower.startsWith('amazon.')
  ) {
    throw new SqsError(
      'InvalidParameterValue',
      `Message (user) attribute name '${preview(name)}' is invalid. It may hold up to 256 letters, digits, "_", "-" and ".", ` +
        'must not start or end with "." nor hold "..", and must not start with "AWS." or "Amazon.".',
    );
  }
}

function checkValue(name: string, raw: unknown, what: string): StoredAttribute {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
    throw new SqsError(
      'InvalidParameterValue',
      `${what} '${name}' must be an object with a DataType and a value.`,
    );
  }
  const { DataType, StringValue, BinaryValue, StringListValues, BinaryListValues, ...rest } = raw as Record<
    string,
    unknown
  >;
  const unknown = Object.keys(rest)[0];
  if (unknown !== undefined) {
    throw new SqsError(
      'InvalidParameterValue',
      `${what} '${name}' has an unknown field ${preview(unknown)}.`,
    );
  }
  if (typeof DataType !== 'string' || DataType === '') {
    throw new SqsError('InvalidParameterValue', `${what} '${name}' must contain a non-empty attribute type.`);
  }
  const base = BASE_TYPES.find((t) => DataType === t || DataType.startsWith(`${t}.`));
  if (!base || DataType.length > 256 || /[^\x21-\x7e]/.test(DataType)) {
    throw new SqsError(
      'InvalidParameterValue',
      `${what} '${name}' has an invalid type '${preview(DataType)}': it must be String, Number or Binary, optionally ` +
        'followed by "." and a custom label (256 characters in all).',
    );
  }
  if (nonEmptyList(StringListValues) || nonEmptyList(BinaryListValues)) {
    throw new SqsError(
      'InvalidParameterValue',
      `${what} '${name}': StringListValues and BinaryListValues are reserved by SQS and not supported.`,
    );
  }
  if (base === 'Binary') {
    if (StringValue !== undefined && StringValue !== null) {
      throw new SqsError(
        'InvalidParameterValue',
        `${what} '${name}' of type Binary must not carry a StringValue.`,
      );
    }
    if (typeof BinaryValue !== 'string' || BinaryValue === '' || !BASE64.test(BinaryValue)) {
      throw new SqsError(
        'InvalidParameterValue',
        `${what} '${name}' must contain a non-empty value of type '${DataType}' (base64).`,
      );
    }
    // Stored re-encoded, so two spellings of the same bytes are one value.
    return { DataType, BinaryValue: Buffer.from(BinaryValue, 'base64').toString('base64') };
  }
  if (BinaryValue !== undefined && BinaryValue !== null) {
    throw new SqsError(
      'InvalidParameterValue',
      `${what} '${name}' of type ${base} must not carry a BinaryValue.`,
    );
  }
  if (typeof StringValue !== 'string' || StringValue === '') {
    throw new SqsError(
      'InvalidParameterValue',
      `${what} '${name}' must contain a non-empty value of type '${DataType}'.`,
    );
  }
  if (OUTSIDE_CHARSET.test(StringValue)) {
    throw new SqsError(
      'InvalidParameterValue',
      `${what} '${name}' has a value with characters outside SQS's set.`,
    );
  }
  if (base === 'Number' && (!NUMBER.test(StringValue) || significantDigits(StringValue) > 38)) {
    throw new SqsError(
      'InvalidParameterValue',
      `${what} '${name}' of type Number must be a decimal number of at most 38 significant digits.`,
    );
  }
  return { DataType, StringValue };
}

const nonEmptyList = (v: unknown) => Array.isArray(v) && v.length > 0;

function significantDigits(number: string): number {
  const mantissa = number.replace(/[eE].*$/, '').replace(/[-+.]/g, '');
  return mantissa.replace(/^0+/, '').length;
}

function valueBytes(attribute: StoredAttribute): number {
  return attribute.BinaryValue !== undefined
    ? Buffer.from(attribute.BinaryValue, 'base64').length
    : Buffer.byteLength(attribute.StringValue ?? '');
}

/** The attributes a receive asked for: "All" or ".*", exact names, and prefixes written "name.*". */
export function selectAttributes(
  attributes: Record<string, StoredAttribute>,
  requested: string[],
): Record<string, StoredAttribute> {
  const out: Record<string, StoredAttribute> = Object.create(null);
  if (requested.length === 0) return out;
  const all = requested.some((r) => r === 'All' || r === '.*');
  const prefixes = requested.filter((r) => r.endsWith('.*') && r !== '.*').map((r) => r.slice(0, -1));
  for (const [name, value] of Object.entries(attributes)) {
    if (all || requested.includes(name) || prefixes.some((p) => name.startsWith(p))) out[name] = value;
  }
  return out;
}
