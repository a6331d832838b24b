import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { md5OfAttributes } from '../../src/sqs/md5.js';
import { ReceiptHandles } from '../../src/sqs/receipt-handle.js';

/**
 * MD5OfMessageAttributes against digests published by others, computed by real SQS or by the AWS
 * SDKs' own checks (the Java and Go SDKs verify them; the clients run in npm test do not). None of
 * these values was produced by this code.
 */
describe('MD5OfMessageAttributes', () => {
  it('matches the digests of the AWS SDKs’ samples (string and binary attributes)', () => {
    // The samples the SDKs test their checksum handlers with (as found in YDB's SQS: attributes_md5_ut.cpp).
    expect(
      md5OfAttributes({
        test_attribute_name_2: { DataType: 'String', StringValue: 'test_attribute_value_2' },
        test_attribute_name_1: { DataType: 'String', StringValue: 'test_attribute_value_1' },
      }),
    ).toBe('d53f3b558fe951154770f25cb63dbba9');
    expect(
      md5OfAttributes({
        test_attribute_name: {
          DataType: 'Binary',
          BinaryValue: Buffer.from('test_attribute_value').toString('base64'),
        },
      }),
    ).toBe('23f6bd27ea87aab7dfeadcc9aebee495');
  });

  it('matches digests that SQS returned, as recorded by LocalStack and sqslite', () => {
    expect(md5OfAttributes({ timestamp: { DataType: 'Number', StringValue: '1493147359900' } })).toBe(
      '235c5c510d26fb653d073faed50ae77c',
    );
    expect(
      md5OfAttributes({
        ordinal: { DataType: 'Number', StringValue: '1' },
        category: { DataType: 'String', StringValue: 'test' },
      }),
    ).toBe('d21ae90c49061e927f57df5f5d72be1f');
  });

  it('is left out for a message without attributes', () => {
    expect(md5OfAttributes({})).toBeUndefined();
  });
});

describe('receipt handles', () => {
  const lease = {
    queue: 'billing.invoices',
    id: '123456789',
    leaseToken: '0b6b2c1e-5f3a-4b7e-9d2c-1a2b3c4d5e6f',
  };
  const handles = new ReceiptHandles(randomBytes(32));

  it('carry the queue, job id and lease token, and read back exactly', () => {
    const handle = handles.encode(lease);
    expect(handle).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(handles.decode(handle)).toEqual(lease);
  });

  it('refuse any change: every single flipped bit, a cut, an extra character', () => {
    const handle = handles.encode(lease);
    const bytes = Buffer.from(handle, 'base64url');
    for (let i = 0; i < bytes.length * 8; i++) {
      const changed = Buffer.from(bytes);
      changed[i >> 3]! ^= 1 << (i & 7);
      expect(handles.decode(changed.toString('base64url')), `bit ${i}`).toBeUndefined();
    }
    expect(handles.decode(handle.slice(0, -1))).toBeUndefined();
    expect(handles.decode(`${handle}A`)).toBeUndefined();
    expect(handles.decode('')).toBeUndefined();
  });

  it('cannot be rewritten without the key: another queue, id or token under any other key is refused', () => {
    const other = new ReceiptHandles(randomBytes(32));
    for (const forged of [
      { ...lease, queue: 'tenant-b' },
      { ...lease, id: '123456790' },
      { ...lease, leaseToken: '0b6b2c1e-5f3a-4b7e-9d2c-1a2b3c4d5e70' },
      lease,
    ]) {
      expect(handles.decode(other.encode(forged))).toBeUndefined();
    }
    // The bytes of a valid handle with the queue rewritten and the old tag kept.
    const bytes = Buffer.from(handles.encode(lease), 'base64url');
    const tag = bytes.subarray(bytes.length - 16);
    const body = bytes.subarray(0, 1 + 16 + 8);
    const rewritten = Buffer.concat([body, Buffer.from('billing.invoicez'), tag]).toString('base64url');
    expect(handles.decode(rewritten)).toBeUndefined();
  });
});
