import { describe, expect, it } from 'vitest';
import { preview } from '../../src/json/preview.js';
import { errorResponse } from '../../src/sqs/endpoint.js';
import { invalidValue } from '../../src/sqs/errors.js';

/**
 * Error messages quote what a client sent. Describing a value must never throw (a throw while
 * building a 400 became a 500) and must cost what it prints, whatever the value.
 */

/** Nested a million levels deep, built without recursion. */
function millionDeep(): unknown {
  let value: unknown = 1;
  for (let i = 0; i < 1_000_000; i++) value = [value];
  return value;
}

const cyclic: Record<string, unknown> = { name: 'loop' };
cyclic.self = cyclic;

const hostile: [string, unknown][] = [
  ['an array nested 1,000,000 levels deep', millionDeep()],
  ['a cyclic object', cyclic],
  ['a BigInt', 12345678901234567890n],
  ['a 10 MB string', 'x'.repeat(10 * 1024 * 1024)],
  ['a symbol', Symbol('s')],
  ['a symbol inside an object', { s: Symbol.iterator }],
  [
    'an object whose getter and toJSON throw',
    {
      get boom(): never {
        throw new Error('getter');
      },
      toJSON(): never {
        throw new Error('toJSON');
      },
    },
  ],
  [
    'a proxy whose every trap throws',
    new Proxy(
      {},
      {
        ownKeys: () => {
          throw new Error('ownKeys');
        },
        get: () => {
          throw new Error('get');
        },
      },
    ),
  ],
  ['a function', () => 1],
  ['undefined', undefined],
];

describe('preview', () => {
  it.each(hostile)('does not throw on %s, and stays one short line', (_, value) => {
    const text = preview(value);
    expect(text.length).toBeLessThanOrEqual(80);
    expect(text).not.toMatch(/[\r\n]/);
  });

  it('shows what a client sent as JSON does, cut with an ellipsis', () => {
    expect(preview({ a: [1, 'two', null, true], b: {} })).toBe('{"a":[1,"two",null,true],"b":{}}');
    expect(preview('a string\r\nover two lines')).toBe('a string over two lines');
    expect(preview(millionDeep())).toBe(`${'['.repeat(77)}...`);
    expect(preview(cyclic)).toMatch(/^\{"name":"loop","self":\{"name":"loop","self":.*\.\.\.$/);
    expect(preview(12345678901234567890n)).toBe('12345678901234567890n');
    expect(preview(JSON.rawJSON('123456789012345678901234567890'))).toBe('123456789012345678901234567890');
    expect(
      preview({
        ok: 1,
        get boom() {
          throw new Error('x');
        },
      }),
    ).toBe('{"ok":1,"boom":(a getter that threw)}');
  });

  it('a 10 MB string costs no more than a short one', () => {
    const huge = `${'"'.repeat(10 * 1024 * 1024)}`;
    const started = performance.now();
    for (let i = 0; i < 1000; i++) preview({ huge });
    expect(performance.now() - started).toBeLessThan(1000);
  });
});

describe('SQS errors built from hostile values', () => {
  it.each(hostile)('%s: InvalidParameterValue, 400, answerable in both protocols', (_, value) => {
    const err = invalidValue('QueueUrl', value, 'must be a string.');
    expect(err).toMatchObject({ shape: 'InvalidParameterValue', status: 400 });
    for (const protocol of ['json', 'query'] as const) {
      const response = errorResponse(protocol, err, 'request-id');
      expect(response.status).toBe(400);
      expect(response.body.length).toBeLessThan(1024);
    }
  });

  it('a message quoting a megabyte-long name is cut to 1,024 characters', () => {
    const err = invalidValue(`MessageAttributes.${'n'.repeat(1024 * 1024)}`, 1, 'must be a string.');
    expect(err.message.length).toBe(1024);
    expect(err.message.endsWith('...')).toBe(true);
  });
});
