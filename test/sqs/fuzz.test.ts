import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { serverSecret } from '../../src/db/server-secrets.js';
import { ACTIONS } from '../../src/sqs/actions/index.js';
import { RECEIPT_HANDLE_SECRET, ReceiptHandles } from '../../src/sqs/receipt-handle.js';
import { useTestApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';

/**
 * Property-based fuzzing of the SQS endpoint, in both protocols: whatever arrives (any action name,
 * parameters of any type and shape, flattened query keys of any depth, unicode and control
 * characters), the answer is never a 5xx and every error is in SQS's shape for its protocol.
 */
const database = useTestDatabase();
const app = useTestApp(database, { BATON_SHED_EVENT_LOOP_DELAY_MS: '0', BATON_SHED_POOL_WAITING: '0' });
const RUNS = Number(process.env.FUZZ_RUNS ?? 150);
const URL_ = 'http://127.0.0.1/000000000000/fuzz-q';
const FIFO_URL = 'http://127.0.0.1/000000000000/fuzz-q.fifo';

/** A handle this server could have issued (its tag is right), written once the key is read. */
let wellFormedHandle = '';

beforeAll(async () => {
  wellFormedHandle = new ReceiptHandles(await serverSecret(database.db, RECEIPT_HANDLE_SECRET)).encode({
    queue: 'fuzz-q',
    id: '1',
    leaseToken: '00000000-0000-4000-8000-000000000000',
  });
  for (const body of [
    { QueueName: 'fuzz-q' },
    { QueueName: 'fuzz-q.fifo', Attributes: { FifoQueue: 'true', ContentBasedDeduplication: 'true' } },
  ]) {
    await app.inject({
      method: 'POST',
      url: '/',
      headers: { 'content-type': 'application/x-amz-json-1.0', 'x-amz-target': 'AmazonSQS.CreateQueue' },
      payload: JSON.stringify(body),
    });
  }
});

const action = fc.oneof(fc.constantFrom(...Object.keys(ACTIONS)), fc.string({ maxLength: 30 }));
const text = fc.oneof(
  fc.string({ maxLength: 40 }),
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.constantFrom(
    '',
    URL_,
    FIFO_URL,
    FIFO_URL,
    'fuzz-q.fifo',
    'All',
    '.*',
    'fuzz-q',
    '-1',
    '0',
    '10',
    '43201',
    'true',
    '{}',
    '{"maxReceiveCount":1}',
    'FifoQueue',
    'ContentBasedDeduplication',
    'DeduplicationScope',
    'messageGroup',
    'FifoThroughputLimit',
    'perMessageGroupId',
    'True',
    'SequenceNumber',
  ),
  fc.constant(null).map(() => wellFormedHandle),
);
const value: fc.Arbitrary<unknown> = fc.letrec((tie) => ({
  any: fc.oneof(
    { depthSize: 'small' },
    text,
    fc.integer({ min: -2, max: 50_000 }),
    fc.double(),
    fc.boolean(),
    fc.constant(null),
    fc.array(tie('any'), { maxLength: 4 }),
    fc.dictionary(
      fc.oneof(
        text,
        fc.constantFrom(
          'DataType',
          'StringValue',
          'BinaryValue',
          'Id',
          'MessageBody',
          'MessageGroupId',
          'MessageDeduplicationId',
          'FifoQueue',
          '__proto__',
        ),
      ),
      tie('any'),
      {
        maxKeys: 4,
      },
    ),
  ),
})).any;
const MEMBERS = [
  'QueueUrl',
  'QueueName',
  'MessageBody',
  'ReceiptHandle',
  'VisibilityTimeout',
  'MaxNumberOfMessages',
  'WaitTimeSeconds',
  'DelaySeconds',
  'Entries',
  'Attributes',
  'AttributeNames',
  'MessageAttributes',
  'MessageAttributeNames',
  'MessageSystemAttributes',
  'Tags',
  'TagKeys',
  'MaxResults',
  'NextToken',
  'MessageGroupId',
  'MessageDeduplicationId',
  'ReceiveRequestAttemptId',
  'MessageSystemAttributeNames',
  'QueueNamePrefix',
];
const input = fc.dictionary(fc.oneof(fc.constantFrom(...MEMBERS), fc.string({ maxLength: 10 })), value, {
  maxKeys: 6,
});

async function expectSqsAnswer(
  res: Awaited<ReturnType<typeof app.inject>>,
  protocol: 'json' | 'query',
  what: string,
) {
  expect(res.statusCode, `${what} → ${res.body.slice(0, 300)}`).toBeLessThan(500);
  if (res.statusCode < 400) return;
  // Validation names the parameter; the database's refusal (a value it could not take) names none.
  expect(res.body, what).not.toMatch(/A value was refused/);
  if (protocol === 'json') {
    expect(res.headers['x-amzn-query-error'], what).toMatch(/^[\w.]+;Sender$/);
    expect(res.json().__type, what).toMatch(/^com\.amazonaws\.sqs#\w+$/);
  } else {
    expect(res.body, what).toMatch(
      /^<\?xml version="1\.0"\?><ErrorResponse [^>]+><Error><Type>Sender<\/Type><Code>[\w.]+<\/Code>/,
    );
  }
}

describe('fuzzing the SQS endpoint', () => {
  it('the JSON protocol: any action with any input answers < 500 in SQS’s shape', async () => {
    await fc.assert(
      fc.asyncProperty(action, input, async (name, body) => {
        const res = await app.inject({
          method: 'POST',
          url: '/',
          headers: { 'content-type': 'application/x-amz-json-1.0', 'x-amz-target': `AmazonSQS.${name}` },
          payload: JSON.stringify(body),
        });
        await expectSqsAnswer(res, 'json', `${name} ${JSON.stringify(body).slice(0, 200)}`);
      }),
      { numRuns: RUNS },
    );
  });

  it('FIFO sends with any group, deduplication id and delay answer < 500 in SQS’s shape', async () => {
    const idLike = fc.oneof(
      value,
      fc.string({ minLength: 1, maxLength: 130, unit: fc.constantFrom('a', '!', '~', ' ', '\t', 'é', '0') }),
    );
    const message = fc.record(
      {
        MessageBody: fc.oneof(text, fc.constant('body')),
        MessageGroupId: idLike,
        MessageDeduplicationId: idLike,
        DelaySeconds: value,
      },
      { requiredKeys: ['MessageBody'] },
    );
    await fc.assert(
      fc.asyncProperty(
        fc.boolean(),
        message,
        fc.array(message, { maxLength: 3 }),
        async (batch, one, many) => {
          const [name, body] = batch
            ? [
                'SendMessageBatch',
                { QueueUrl: FIFO_URL, Entries: many.map((m, i) => ({ Id: `e${i}`, ...m })) },
              ]
            : ['SendMessage', { QueueUrl: FIFO_URL, ...one }];
          const res = await app.inject({
            method: 'POST',
            url: '/',
            headers: { 'content-type': 'application/x-amz-json-1.0', 'x-amz-target': `AmazonSQS.${name}` },
            payload: JSON.stringify(body),
          });
          await expectSqsAnswer(res, 'json', `${name} ${JSON.stringify(body).slice(0, 200)}`);
        },
      ),
      { numRuns: RUNS },
    );
  });

  it('the query protocol: any flattened parameters answer < 500 in XML', async () => {
    const key = fc.array(
      fc.oneof(
        fc.constantFrom(...MEMBERS, 'Attribute', 'MessageAttribute', 'Name', 'Value', 'Id'),
        fc.nat({ max: 3 }).map(String),
        fc.string({ maxLength: 6 }),
      ),
      {
        minLength: 1,
        maxLength: 5,
      },
    );
    await fc.assert(
      fc.asyncProperty(action, fc.array(fc.tuple(key, text), { maxLength: 8 }), async (name, pairs) => {
        const form = new URLSearchParams([
          ['Action', name],
          ...pairs.map(([k, v]) => [k.join('.'), v] as [string, string]),
        ]);
        const res = await app.inject({
          method: 'POST',
          url: '/',
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
          payload: form.toString(),
        });
        await expectSqsAnswer(res, 'query', form.toString().slice(0, 300));
      }),
      { numRuns: RUNS },
    );
  });
});
