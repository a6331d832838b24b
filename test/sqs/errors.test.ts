import {
  CreateQueueCommand,
  DeleteMessageBatchCommand,
  DeleteMessageCommand,
  GetQueueAttributesCommand,
  GetQueueUrlCommand,
  ReceiveMessageCommand,
  SendMessageBatchCommand,
  SendMessageCommand,
  SetQueueAttributesCommand,
} from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serverSecret } from '../../src/db/server-secrets.js';
import { RECEIPT_HANDLE_SECRET, ReceiptHandles } from '../../src/sqs/receipt-handle.js';
import { createTestApp, listen, useListeningApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { api } from '../support/http.js';
import { failure, sqsClient } from './support.js';

/**
 * Bad input gets SQS's own error codes and shapes, as the SDK sees them (its error class, the
 * `Code` of the query protocol, the HTTP status), and never a 5xx.
 */
const database = useTestDatabase();
const server = useListeningApp(database);
let sqs: ReturnType<typeof sqsClient>;
let url: string;
beforeAll(async () => {
  sqs = sqsClient(server.url, { maxAttempts: 1 });
  url = (await sqs.send(new CreateQueueCommand({ QueueName: 'errors' }))).QueueUrl!;
});
afterAll(() => sqs?.destroy());

/** A raw JSON-protocol request, for what an SDK would not send. */
async function raw(action: string, body: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(`${server.url}/`, {
    method: 'POST',
    headers: {
      'content-type': 'application/x-amz-json-1.0',
      'x-amz-target': `AmazonSQS.${action}`,
      ...headers,
    },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  return {
    status: res.status,
    headers: res.headers,
    body: (await res.json()) as { __type: string; message: string },
  };
}

describe('SQS errors', () => {
  it('an unknown queue: QueueDoesNotExist, code AWS.SimpleQueueService.NonExistentQueue, 400', async () => {
    const err = await failure(sqs.send(new GetQueueUrlCommand({ QueueName: 'nope' })));
    expect(err).toMatchObject({ name: 'QueueDoesNotExist', Code: 'AWS.SimpleQueueService.NonExistentQueue' });
    expect(err.$metadata.httpStatusCode).toBe(400);
    const send = await failure(
      sqs.send(new SendMessageCommand({ QueueUrl: `${server.url}/000000000000/nope`, MessageBody: 'x' })),
    );
    expect(send.name).toBe('QueueDoesNotExist');
    // Another account's URL names no queue here either.
    const other = await failure(
      sqs.send(new ReceiveMessageCommand({ QueueUrl: `${server.url}/123456789012/errors` })),
    );
    expect(other.name).toBe('QueueDoesNotExist');
    // The wire shape the SDKs read: __type, message, and the query-compatible code in a header.
    const wire = await raw('GetQueueUrl', { QueueName: 'nope' });
    expect(wire.status).toBe(400);
    expect(wire.body).toEqual({ __type: 'com.amazonaws.sqs#QueueDoesNotExist', message: expect.any(String) });
    expect(wire.headers.get('x-amzn-query-error')).toBe('AWS.SimpleQueueService.NonExistentQueue;Sender');
  });

  it('a message over 256 KiB, or over the queue’s MaximumMessageSize, is InvalidParameterValue', async () => {
    const big = await failure(
      sqs.send(new SendMessageCommand({ QueueUrl: url, MessageBody: 'x'.repeat(262_145) })),
    );
    expect(big).toMatchObject({ name: 'InvalidParameterValue' });
    expect(big.message).toMatch(/shorter than 262144 bytes/);
    // Exactly the limit is fine; attributes count towards it.
    await sqs.send(new SendMessageCommand({ QueueUrl: url, MessageBody: 'x'.repeat(262_144) }));
    const withAttributes = await failure(
      sqs.send(
        new SendMessageCommand({
          QueueUrl: url,
          MessageBody: 'x'.repeat(262_140),
          MessageAttributes: { a: { DataType: 'String', StringValue: 'yy' } },
        }),
      ),
    );
    expect(withAttributes.name).toBe('InvalidParameterValue');
    const small = (
      await sqs.send(
        new CreateQueueCommand({ QueueName: 'errors-small', Attributes: { MaximumMessageSize: '1024' } }),
      )
    ).QueueUrl!;
    expect(
      (await failure(sqs.send(new SendMessageCommand({ QueueUrl: small, MessageBody: 'x'.repeat(1025) }))))
        .name,
    ).toBe('InvalidParameterValue');
  });

  it('characters SQS does not allow: InvalidMessageContents', async () => {
    const err = await failure(
      sqs.send(new SendMessageCommand({ QueueUrl: url, MessageBody: 'bell \u0007' })),
    );
    expect(err).toMatchObject({ name: 'InvalidMessageContents' });
    const lone = await raw('SendMessage', `{"QueueUrl": "${url}", "MessageBody": "half \\ud800 a pair"}`);
    expect(lone.body.__type).toBe('com.amazonaws.sqs#InvalidMessageContents');
  });

  it('batches: empty, more than 10, repeated ids and bad ids are refused whole', async () => {
    const entry = (id: string) => ({ Id: id, MessageBody: 'b' });
    const cases: [object[], string, string][] = [
      [[], 'EmptyBatchRequest', 'AWS.SimpleQueueService.EmptyBatchRequest'],
      [
        Array.from({ length: 11 }, (_, i) => entry(`e${i}`)),
        'TooManyEntriesInBatchRequest',
        'AWS.SimpleQueueService.TooManyEntriesInBatchRequest',
      ],
      [
        [entry('a'), entry('a')],
        'BatchEntryIdsNotDistinct',
        'AWS.SimpleQueueService.BatchEntryIdsNotDistinct',
      ],
      [[entry('no spaces')], 'InvalidBatchEntryId', 'AWS.SimpleQueueService.InvalidBatchEntryId'],
    ];
    for (const [entries, name, code] of cases) {
      const err = await failure(
        sqs.send(new SendMessageBatchCommand({ QueueUrl: url, Entries: entries as never })),
      );
      expect(err, name).toMatchObject({ name, Code: code });
    }
    const before = await api(server.app).call('GET', '/v1/queues/errors/jobs?state=ready&limit=500');
    expect(before.status).toBe(200);
  });

  it('a batch answers each bad entry on its own; the others are sent', async () => {
    const out = await sqs.send(
      new SendMessageBatchCommand({
        QueueUrl: url,
        Entries: [
          { Id: 'good', MessageBody: 'fine' },
          { Id: 'delay', MessageBody: 'late', DelaySeconds: 901 },
          {
            Id: 'attr',
            MessageBody: 'x',
            MessageAttributes: { 'AWS.reserved': { DataType: 'String', StringValue: 'v' } },
          },
        ],
      }),
    );
    expect(out.Successful!.map((s) => s.Id)).toEqual(['good']);
    expect(out.Failed!.map((f) => [f.Id, f.Code, f.SenderFault])).toEqual([
      ['delay', 'InvalidParameterValue', true],
      ['attr', 'InvalidParameterValue', true],
    ]);
  });

  it('a batch whose messages total more than 256 KiB: BatchRequestTooLong', async () => {
    const entries = Array.from({ length: 3 }, (_, i) => ({
      Id: `big${i}`,
      MessageBody: 'x'.repeat(100_000),
    }));
    const err = await failure(sqs.send(new SendMessageBatchCommand({ QueueUrl: url, Entries: entries })));
    expect(err).toMatchObject({
      name: 'BatchRequestTooLong',
      Code: 'AWS.SimpleQueueService.BatchRequestTooLong',
    });
  });

  it('receipt handles: made up or of another queue is ReceiptHandleIsInvalid; a stale one deletes nothing', async () => {
    // This server's own key, to write handles it could have issued; and a key of another server.
    const ours = new ReceiptHandles(await serverSecret(database.db, RECEIPT_HANDLE_SECRET));
    const theirs = new ReceiptHandles(crypto.getRandomValues(Buffer.alloc(32)));
    for (const handle of [
      'not-a-handle',
      'AQ',
      ours.encode({ queue: 'errors-small', id: '1', leaseToken: crypto.randomUUID() }),
      theirs.encode({ queue: 'errors', id: '1', leaseToken: crypto.randomUUID() }),
    ]) {
      const err = await failure(sqs.send(new DeleteMessageCommand({ QueueUrl: url, ReceiptHandle: handle })));
      expect(err, handle).toMatchObject({ name: 'ReceiptHandleIsInvalid' });
      expect(err.$metadata.httpStatusCode).toBe(404);
    }
    // A handle in the right form naming a lease that never was: a stale handle, not an error.
    await sqs.send(
      new DeleteMessageCommand({
        QueueUrl: url,
        ReceiptHandle: ours.encode({
          queue: 'errors',
          id: '999999',
          leaseToken: crypto.randomUUID(),
        }),
      }),
    );
    // A tampered handle (one bit flipped) fails its tag.
    await sqs.send(new SendMessageCommand({ QueueUrl: url, MessageBody: 'tamper' }));
    const [m] = (await sqs.send(new ReceiveMessageCommand({ QueueUrl: url, MaxNumberOfMessages: 1 })))
      .Messages!;
    const bytes = Buffer.from(m!.ReceiptHandle!, 'base64url');
    bytes[5]! ^= 1;
    const out = await sqs.send(
      new DeleteMessageBatchCommand({
        QueueUrl: url,
        Entries: [
          { Id: 'bad', ReceiptHandle: bytes.toString('base64url') },
          { Id: 'good', ReceiptHandle: m!.ReceiptHandle! },
        ],
      }),
    );
    expect(out.Successful!.map((s) => s.Id)).toEqual(['good']);
    expect(out.Failed!.map((f) => [f.Id, f.Code])).toEqual([['bad', 'ReceiptHandleIsInvalid']]);
  });

  it('attributes: unknown names are InvalidAttributeName, bad values InvalidAttributeValue', async () => {
    expect(
      (
        await failure(
          sqs.send(new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ['Nope' as never] })),
        )
      ).name,
    ).toBe('InvalidAttributeName');
    expect(
      (
        await failure(
          sqs.send(new SetQueueAttributesCommand({ QueueUrl: url, Attributes: { Colour: 'red' } as never })),
        )
      ).name,
    ).toBe('InvalidAttributeName');
    expect(
      (
        await failure(
          sqs.send(
            new SetQueueAttributesCommand({ QueueUrl: url, Attributes: { VisibilityTimeout: '43201' } }),
          ),
        )
      ).name,
    ).toBe('InvalidAttributeValue');
    const redrive = await failure(
      sqs.send(
        new SetQueueAttributesCommand({
          QueueUrl: url,
          Attributes: {
            RedrivePolicy: JSON.stringify({
              deadLetterTargetArn: 'arn:aws:sqs:us-east-1:000000000000:gone',
              maxReceiveCount: 3,
            }),
          },
        }),
      ),
    );
    expect(redrive).toMatchObject({ name: 'InvalidParameterValue' });
    expect(redrive.message).toMatch(/Dead letter target does not exist/);
  });

  it('FIFO queue names and attributes: SQS errors', async () => {
    // FifoQueue=true needs a .fifo name, and a .fifo name needs FifoQueue=true.
    for (const [QueueName, Attributes] of [
      ['orders', { FifoQueue: 'true' }],
      ['orders.fifo', {}],
      ['orders.fifo', { FifoQueue: 'false' }],
    ] as const) {
      const err = await failure(sqs.send(new CreateQueueCommand({ QueueName, Attributes })));
      expect(err.name, `${QueueName} ${JSON.stringify(Attributes)}`).toBe('InvalidParameterValue');
      expect(err.message).toMatch(/\.fifo/);
    }
    // A standard queue has none of the FIFO attributes, on create or set.
    const expected = {
      ContentBasedDeduplication: ['InvalidAttributeName', 'Unknown Attribute ContentBasedDeduplication.'],
      DeduplicationScope: [
        'InvalidAttributeName',
        'You can specify the DeduplicationScope only when FifoQueue is set to true.',
      ],
      FifoThroughputLimit: [
        'InvalidAttributeName',
        'You can specify the FifoThroughputLimit only when FifoQueue is set to true.',
      ],
    };
    const values = {
      ContentBasedDeduplication: 'false',
      DeduplicationScope: 'queue',
      FifoThroughputLimit: 'perQueue',
    };
    for (const [name, [code, message]] of Object.entries(expected)) {
      const Attributes = { [name]: values[name as keyof typeof values] };
      const create = await failure(sqs.send(new CreateQueueCommand({ QueueName: 'errors-std', Attributes })));
      expect([create.name, create.message], name).toEqual([code, message]);
      const set = await failure(sqs.send(new SetQueueAttributesCommand({ QueueUrl: url, Attributes })));
      expect([set.name, set.message], name).toEqual([code, message]);
    }
    // The queue type is chosen once: a standard queue cannot be made FIFO, nor a FIFO queue standard.
    const toFifo = await failure(
      sqs.send(new SetQueueAttributesCommand({ QueueUrl: url, Attributes: { FifoQueue: 'true' } })),
    );
    expect([toFifo.name, toFifo.message]).toEqual(['InvalidAttributeName', 'Unknown Attribute FifoQueue.']);
    const fifo = (
      await sqs.send(new CreateQueueCommand({ QueueName: 'errors.fifo', Attributes: { FifoQueue: 'true' } }))
    ).QueueUrl!;
    await sqs.send(new SetQueueAttributesCommand({ QueueUrl: fifo, Attributes: { FifoQueue: 'true' } }));
    const toStandard = await failure(
      sqs.send(new SetQueueAttributesCommand({ QueueUrl: fifo, Attributes: { FifoQueue: 'false' } })),
    );
    expect([toStandard.name, toStandard.message]).toEqual([
      'InvalidAttributeValue',
      'Invalid value for the parameter FifoQueue. Reason: Modifying queue type is not supported.',
    ]);
    for (const Attributes of [
      { DeduplicationScope: 'group' },
      { FifoThroughputLimit: 'perGroup' },
      { ContentBasedDeduplication: 'yes' },
    ]) {
      const err = await failure(sqs.send(new SetQueueAttributesCommand({ QueueUrl: fifo, Attributes })));
      expect(err.name, JSON.stringify(Attributes)).toBe('InvalidAttributeValue');
    }
    // Deduplication is for FIFO queues only.
    const dedup = await failure(
      sqs.send(new SendMessageCommand({ QueueUrl: url, MessageBody: 'x', MessageDeduplicationId: 'd1' })),
    );
    expect(dedup.name).toBe('InvalidParameterValue');
  });

  it('FIFO sends: SQS errors for a missing group or deduplication id, a message delay, bad ids', async () => {
    const fifo = (
      await sqs.send(
        new CreateQueueCommand({ QueueName: 'errors-send.fifo', Attributes: { FifoQueue: 'true' } }),
      )
    ).QueueUrl!;
    const send = (input: Record<string, unknown>) =>
      failure(sqs.send(new SendMessageCommand({ QueueUrl: fifo, MessageBody: 'x', ...input })));
    const noGroup = await send({ MessageDeduplicationId: 'd1' });
    expect([noGroup.name, noGroup.message]).toEqual([
      'MissingParameter',
      'The request must contain the parameter MessageGroupId.',
    ]);
    const noDedup = await send({ MessageGroupId: 'g' });
    expect([noDedup.name, noDedup.message]).toEqual([
      'InvalidParameterValue',
      'The queue should either have ContentBasedDeduplication enabled or MessageDeduplicationId provided explicitly',
    ]);
    const delayed = await send({ MessageGroupId: 'g', MessageDeduplicationId: 'd1', DelaySeconds: 2 });
    expect([delayed.name, delayed.message]).toEqual([
      'InvalidParameterValue',
      'Value 2 for parameter DelaySeconds is invalid. Reason: The request include parameter that is not valid for this queue type.',
    ]);
    for (const id of ['', 'a'.repeat(129), 'group 123', 'tab\there']) {
      const err = await send({ MessageGroupId: 'g', MessageDeduplicationId: id });
      expect(err.name, JSON.stringify(id)).toBe('InvalidParameterValue');
      expect(err.message).toMatch(
        /MessageDeduplicationId can only include alphanumeric and punctuation characters/,
      );
    }
    const badGroup = await send({ MessageGroupId: 'a b', MessageDeduplicationId: 'd1' });
    expect(badGroup.message).toMatch(
      /MessageGroupId can only include alphanumeric and punctuation characters/,
    );
    // DelaySeconds 0 is allowed (the queue's delay applies); 128 characters of punctuation are an id.
    const ok = await sqs.send(
      new SendMessageCommand({
        QueueUrl: fifo,
        MessageBody: 'x',
        MessageGroupId: 'g',
        MessageDeduplicationId: `${'!~'.repeat(63)}ab`,
        DelaySeconds: 0,
      }),
    );
    expect(ok.SequenceNumber).toBe(ok.MessageId);
    // A batch lacking a group or a deduplication id in any entry is refused whole.
    const batch = (entries: Record<string, unknown>[]) =>
      failure(
        sqs.send(
          new SendMessageBatchCommand({
            QueueUrl: fifo,
            Entries: entries.map((e, i) => ({ Id: `e${i}`, MessageBody: 'x', ...e })),
          }),
        ),
      );
    const batchNoGroup = await batch([
      { MessageGroupId: 'g', MessageDeduplicationId: 'b1' },
      { MessageDeduplicationId: 'b2' },
    ]);
    expect([batchNoGroup.name, batchNoGroup.message]).toEqual([
      'InvalidParameterValue',
      'The request must contain the parameter MessageGroupId.',
    ]);
    const batchNoDedup = await batch([
      { MessageGroupId: 'g', MessageDeduplicationId: 'b1' },
      { MessageGroupId: 'g' },
    ]);
    expect(batchNoDedup.message).toMatch(/ContentBasedDeduplication/);
    // Nothing of either batch was sent.
    const jobs = await api(server.app).call('GET', '/v1/queues/errors-send.fifo/jobs?state=ready');
    expect(jobs.body.jobs).toHaveLength(1);
  });

  it('a RedrivePolicy needs a dead-letter queue of the same type: FIFO for FIFO, standard for standard', async () => {
    await sqs.send(
      new CreateQueueCommand({ QueueName: 'errors-dlq.fifo', Attributes: { FifoQueue: 'true' } }),
    );
    await sqs.send(new CreateQueueCommand({ QueueName: 'errors-dlq' }));
    const policy = (target: string) =>
      JSON.stringify({
        deadLetterTargetArn: `arn:aws:sqs:us-east-1:000000000000:${target}`,
        maxReceiveCount: 3,
      });
    for (const [QueueName, target, FifoQueue] of [
      ['errors-src.fifo', 'errors-dlq', 'true'],
      ['errors-src', 'errors-dlq.fifo', undefined],
    ] as const) {
      const err = await failure(
        sqs.send(
          new CreateQueueCommand({
            QueueName,
            Attributes: { RedrivePolicy: policy(target), ...(FifoQueue ? { FifoQueue } : {}) },
          }),
        ),
      );
      expect(err.name, QueueName).toBe('InvalidParameterValue');
      expect(err.message).toMatch(/Dead-letter queue must be same type of queue as the source/);
    }
    const set = await failure(
      sqs.send(
        new SetQueueAttributesCommand({
          QueueUrl: url,
          Attributes: { RedrivePolicy: policy('errors-dlq.fifo') },
        }),
      ),
    );
    expect(set.message).toMatch(/same type/);
  });

  it('creating an existing queue with other attributes: QueueNameExists; with the same ones it is idempotent', async () => {
    await sqs.send(
      new CreateQueueCommand({ QueueName: 'errors-same', Attributes: { VisibilityTimeout: '40' } }),
    );
    const again = await sqs.send(
      new CreateQueueCommand({ QueueName: 'errors-same', Attributes: { VisibilityTimeout: '40' } }),
    );
    expect(again.QueueUrl).toMatch(/\/errors-same$/);
    const clash = await failure(
      sqs.send(new CreateQueueCommand({ QueueName: 'errors-same', Attributes: { VisibilityTimeout: '41' } })),
    );
    expect(clash).toMatchObject({ name: 'QueueNameExists', Code: 'QueueAlreadyExists' });
  });

  it('concurrent CreateQueue calls with different attributes, on two replicas: one creates the queue, the others are told QueueNameExists', async () => {
    const other = await createTestApp(database);
    const otherSqs = sqsClient(await listen(other), { maxAttempts: 1 });
    try {
      for (let round = 0; round < 5; round++) {
        const name = `errors-race-${round}`;
        const timeouts = Array.from({ length: 16 }, (_, i) => String(30 + i));
        const answers = await Promise.all(
          timeouts.map((t, i) =>
            (i % 2 ? otherSqs : sqs)
              .send(new CreateQueueCommand({ QueueName: name, Attributes: { VisibilityTimeout: t } }))
              .then(() => t)
              .catch((err: Error) => err.name),
          ),
        );
        const created = answers.filter((a) => a !== 'QueueNameExists');
        expect(created, name).toHaveLength(1);
        // The queue has the attributes of the call that created it, not of whichever wrote last.
        const attrs = await sqs.send(
          new GetQueueAttributesCommand({
            QueueUrl: url.replace(/[^/]+$/, name),
            AttributeNames: ['VisibilityTimeout'],
          }),
        );
        expect(attrs.Attributes?.VisibilityTimeout, name).toBe(created[0]);
      }
    } finally {
      otherSqs.destroy();
      await other.close();
    }
  });

  it('out-of-range receive parameters are InvalidParameterValue', async () => {
    for (const input of [{ MaxNumberOfMessages: 11 }, { WaitTimeSeconds: 21 }, { VisibilityTimeout: -1 }]) {
      const err = await failure(sqs.send(new ReceiveMessageCommand({ QueueUrl: url, ...input })));
      expect(err.name, JSON.stringify(input)).toBe('InvalidParameterValue');
    }
  });

  it('raw requests: a missing parameter, an unsupported or unknown action, bad JSON, another content type', async () => {
    const missing = await raw('SendMessage', { QueueUrl: url });
    expect([missing.status, missing.body.__type, missing.headers.get('x-amzn-query-error')]).toEqual([
      400,
      'com.amazonaws.sqs#MissingParameter',
      'MissingParameter;Sender',
    ]);
    expect(missing.body.message).toBe('The request must contain the parameter MessageBody.');
    const unsupported = await raw('AddPermission', { QueueUrl: url });
    expect(unsupported.body.__type).toBe('com.amazonaws.sqs#UnsupportedOperation');
    expect(unsupported.body.message).toMatch(/AddPermission/);
    expect((await raw('Frobnicate', {})).body.__type).toBe('com.amazonaws.sqs#InvalidAction');
    // Names that every JavaScript object has are not actions or attributes (found by test/sqs/fuzz.test.ts).
    expect((await raw('valueOf', {})).body.__type).toBe('com.amazonaws.sqs#InvalidAction');
    const inherited = await raw('SetQueueAttributes', { QueueUrl: url, Attributes: { toString: 'x' } });
    expect(inherited.body.__type).toBe('com.amazonaws.sqs#InvalidAttributeName');
    expect((await raw('ListQueues', '{"QueueNamePrefix": ')).body.__type).toBe(
      'com.amazonaws.sqs#SerializationException',
    );
    const json = await fetch(`${server.url}/`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{}',
    });
    expect(json.status).toBe(400);
    expect(json.headers.get('content-type')).toMatch(/^text\/xml/);
    expect(await json.text()).toMatch(/<Code>InvalidAction<\/Code>/);
  });

  it('never answers 5xx to any of the above', async () => {
    const res = await raw('SendMessage', { QueueUrl: 42, MessageBody: { nested: true }, DelaySeconds: '5' });
    expect(res.status).toBeLessThan(500);
    const weird = await raw('ReceiveMessage', { QueueUrl: `${server.url}/000000000000/${'x'.repeat(300)}` });
    expect(weird.status).toBe(400);
  });
});
