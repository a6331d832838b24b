import { createHash, hash } from 'node:crypto';

/**
 * The digests SQS answers with, which SDKs check: MD5OfMessageBody (every SDK checks it on send
 * and receive) and MD5OfMessageAttributes / MD5OfMessageSystemAttributes (the Java and Go SDKs
 * check those). The attribute digest is SQS's documented encoding: the attributes sorted by name,
 * each written as its name, its data type, a transport byte (1 for a string value, 2 for binary) and
 * its value, every field prefixed by its byte length as a 4-byte big-endian integer; then MD5.
 */

/** A message attribute as Baton stores it: a binary value as base64. */
export interface StoredAttribute {
  DataType: string;
  StringValue?: string;
  BinaryValue?: string;
}

export function md5Hex(data: string | Buffer): string {
  return hash('md5', data, 'hex');
}

/** MD5 of a set of attributes, or undefined for none (SQS leaves the field out then). */
export function md5OfAttributes(attributes: Record<string, StoredAttribute>): string | undefined {
  const names = Object.keys(attributes).sort();
  if (names.length === 0) return undefined;
  const hash = createHash('md5');
  const field = (bytes: Buffer) => {
    const length = Buffer.alloc(4);
    length.writeUInt32BE(bytes.length);
    hash.update(length);
    hash.update(bytes);
  };
  for (const name of names) {
    const attribute = attributes[name]!;
    field(Buffer.from(name, 'utf8'));
    field(Buffer.from(attribute.DataType, 'utf8'));
    if (attribute.BinaryValue !== undefined) {
      hash.update(Buffer.of(2));
      field(Buffer.from(attribute.BinaryValue, 'base64'));
    } else {
      hash.update(Buffer.of(1));
      field(Buffer.from(attribute.StringValue ?? '', 'utf8'));
    }
  }
  return hash.digest('hex');
}
