import {
  ChangeMessageVisibilityBatchCommand,
  ChangeMessageVisibilityCommand,
  CreateQueueCommand,
  DeleteMessageBatchCommand,
  DeleteMessageCommand,
  DeleteQueueCommand,
  GetQueueAttributesCommand,
  GetQueueUrlCommand,
  ListQueuesCommand,
  ListQueueTagsCommand,
  PurgeQueueCommand,
  ReceiveMessageCommand,
  SendMessageBatchCommand,
  SendMessageCommand,
  SetQueueAttributesCommand,
  TagQueueCommand,
  UntagQueueCommand,
} from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { useListeningApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { api } from '../support/http.js';
import { metricValue } from '../support/prometheus.js';
import { until } from '../support/until.js';
import { sqsClient } from './support.js';

/**
 * The AWS SDK for JavaScript v3 (@aws-sdk/client-sqs, unmodified) against a real Baton server over
 * HTTP: queues, send, receive, long-poll wake-up, visibility, delete, batches. The SDK checks
 * MD5OfMessageBody on every send and receive, so each successful call here also checks the digests.
 */
const database = useTestDatabase();
// Polling only once a minute: a long-poll that returns a message in time was woken, not polling.
const server = useListeningApp(database, { BATON_POLL_INTERVAL_MS: '60000' });
let sqs: ReturnType<typeof sqsClient>;
beforeAll(() => {
  sqs = sqsClient(server.url);
});
afterAll(() => sqs?.destroy());

async function createQueue(name: string, attributes: Record<string, string> = {}): Promise<string> {
  const out = await sqs.send(new CreateQueueCommand({ QueueName: name, Attributes: attributes }));
  return out.QueueUrl!;
}

describe('the SQS endpoint with @aws-sdk/client-sqs', () => {
  it('creates a queue, finds its URL, lists it and reads its attributes', async () => {
    const url = await createQueue('sdk-basics', { VisibilityTimeout: '45', DelaySeconds: '0' });
    expect(url).toBe(`${server.url}/000000000000/sdk-basics`);
    expect((await sqs.send(new GetQueueUrlCommand({ QueueName: 'sdk-basics' }))).QueueUrl).toBe(url);
    const listed = await sqs.send(new ListQueuesCommand({ QueueNamePrefix: 'sdk-ba' }));
    expect(listed.QueueUrls).toEqual([url]);
    const { Attributes } = await sqs.send(
      new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ['All'] }),
    );
    expect(Attributes).toMatchObject({
      VisibilityTimeout: '45',
      QueueArn: 'arn:aws:sqs:us-east-1:000000000000:sdk-basics',
      ApproximateNumberOfMessages: '0',
      MaximumMessageSize: '262144',
    });
    // The same queue through Baton's own API: the visibility timeout is its lease.
    const native = await api(server.app).call('GET', '/v1/queues/sdk-basics');
    expect(native.body).toMatchObject({ lease_ms: 45_000, max_attempts: 1000 });
  });

  it('sends, receives with attributes, and deletes a message', async () => {
    const url = await createQueue('sdk-roundtrip');
    const sent = await sqs.send(
      new SendMessageCommand({
        QueueUrl: url,
        MessageBody: 'héllo\r\nwörld ✓ 😀',
        MessageAttributes: {
          colour: { DataType: 'String', StringValue: 'blue' },
          count: { DataType: 'Number', StringValue: '42' },
          blob: { DataType: 'Binary', BinaryValue: Buffer.from([0, 1, 2, 255]) },
        },
        MessageSystemAttributes: {
          AWSTraceHeader: { DataType: 'String', StringValue: 'Root=1-5759e988-bd862e3fe1be46a994272793' },
        },
      }),
    );
    expect(sent.MessageId).toMatch(/^\d+$/);
    expect(sent.MD5OfMessageAttributes).toMatch(/^[0-9a-f]{32}$/);
    expect(sent.MD5OfMessageSystemAttributes).toMatch(/^[0-9a-f]{32}$/);

    const received = await sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: url,
        MessageAttributeNames: ['All'],
        MessageSystemAttributeNames: ['All'],
      }),
    );
    const [message] = received.Messages!;
    expect(message).toMatchObject({
      MessageId: sent.MessageId,
      Body: 'héllo\r\nwörld ✓ 😀',
      MD5OfMessageAttributes: sent.MD5OfMessageAttributes,
    });
    expect(message!.MessageAttributes!.colour).toEqual({ DataType: 'String', StringValue: 'blue' });
    expect(Buffer.from(message!.MessageAttributes!.blob!.BinaryValue!)).toEqual(Buffer.from([0, 1, 2, 255]));
    expect(message!.Attributes).toMatchObject({
      ApproximateReceiveCount: '1',
      SenderId: 'LOCALDEV',
      AWSTraceHeader: 'Root=1-5759e988-bd862e3fe1be46a994272793',
    });
    expect(Number(message!.Attributes!.SentTimestamp)).toBeGreaterThan(Date.now() - 60_000);

    await sqs.send(new DeleteMessageCommand({ QueueUrl: url, ReceiptHandle: message!.ReceiptHandle! }));
    const job = await api(server.app).get(sent.MessageId!);
    expect(job.body).toMatchObject({ state: 'completed', payload: 'héllo\r\nwörld ✓ 😀' });
    // Baton's own metrics count the work done through SQS.
    const metrics = (await server.app.inject({ method: 'GET', url: '/metrics' })).body;
    for (const name of ['baton_jobs_enqueued_total', 'baton_jobs_claimed_total', 'baton_jobs_acked_total']) {
      expect(metricValue(metrics, name, { queue: 'sdk-roundtrip' }), name).toBe(1);
    }
  });

  it('returns only the message attributes asked for, with the digest of those', async () => {
    const url = await createQueue('sdk-select');
    await sqs.send(
      new SendMessageCommand({
        QueueUrl: url,
        MessageBody: 'x',
        MessageAttributes: {
          'trace.id': { DataType: 'String', StringValue: 't1' },
          'trace.span': { DataType: 'String', StringValue: 's1' },
          other: { DataType: 'String', StringValue: 'o' },
        },
      }),
    );
    const { Messages } = await sqs.send(
      new ReceiveMessageCommand({ QueueUrl: url, MessageAttributeNames: ['trace.*'] }),
    );
    expect(Object.keys(Messages![0]!.MessageAttributes!).sort()).toEqual(['trace.id', 'trace.span']);
    const none = await sqs.send(new ReceiveMessageCommand({ QueueUrl: url, VisibilityTimeout: 0 }));
    expect(none.Messages ?? []).toEqual([]);
  });

  it('long-polls: a waiting receive is woken by a send', async () => {
    const url = await createQueue('sdk-longpoll');
    const waiting = sqs.send(new ReceiveMessageCommand({ QueueUrl: url, WaitTimeSeconds: 20 }));
    await until(() => server.app.wake.waitList.waiting('sdk-longpoll') > 0);
    await sqs.send(new SendMessageCommand({ QueueUrl: url, MessageBody: 'wake up' }));
    const { Messages } = await waiting;
    expect(Messages?.map((m) => m.Body)).toEqual(['wake up']);
  });

  it('a receiver that goes away while it waits loses nothing: the next receive gets the message', async () => {
    const url = await createQueue('sdk-abandoned');
    const abort = new AbortController();
    const waiting = sqs.send(new ReceiveMessageCommand({ QueueUrl: url, WaitTimeSeconds: 20 }), {
      abortSignal: abort.signal,
    });
    await until(() => server.app.wake.waitList.waiting('sdk-abandoned') > 0);
    abort.abort();
    await expect(waiting).rejects.toMatchObject({ name: 'AbortError' });
    await until(() => server.app.wake.waitList.waiting('sdk-abandoned') === 0);
    await sqs.send(new SendMessageCommand({ QueueUrl: url, MessageBody: 'kept' }));
    const { Messages } = await sqs.send(new ReceiveMessageCommand({ QueueUrl: url, WaitTimeSeconds: 5 }));
    expect(Messages?.map((m) => [m.Body, m.Attributes?.ApproximateReceiveCount])).toEqual([
      ['kept', undefined],
    ]);
  });

  it('changes visibility: 0 makes a message visible at once, counted as a receive', async () => {
    const url = await createQueue('sdk-visibility');
    await sqs.send(new SendMessageCommand({ QueueUrl: url, MessageBody: 'again' }));
    const first = (await sqs.send(new ReceiveMessageCommand({ QueueUrl: url, VisibilityTimeout: 600 })))
      .Messages![0]!;
    await sqs.send(
      new ChangeMessageVisibilityCommand({
        QueueUrl: url,
        ReceiptHandle: first.ReceiptHandle!,
        VisibilityTimeout: 0,
      }),
    );
    const second = (
      await sqs.send(
        new ReceiveMessageCommand({
          QueueUrl: url,
          MessageSystemAttributeNames: ['ApproximateReceiveCount'],
        }),
      )
    ).Messages![0]!;
    expect(second.MessageId).toBe(first.MessageId);
    expect(second.Attributes?.ApproximateReceiveCount).toBe('2');
    // The first handle is stale now: changing its visibility is refused, deleting with it is not an
    // error and does not delete the new delivery.
    const stale = sqs.send(
      new ChangeMessageVisibilityCommand({
        QueueUrl: url,
        ReceiptHandle: first.ReceiptHandle!,
        VisibilityTimeout: 30,
      }),
    );
    await expect(stale).rejects.toMatchObject({ name: 'InvalidParameterValue' });
    await sqs.send(new DeleteMessageCommand({ QueueUrl: url, ReceiptHandle: first.ReceiptHandle! }));
    expect((await api(server.app).get(first.MessageId!)).body.state).toBe('claimed');
    // Extending the current lease moves its expiry.
    const before = (await api(server.app).get(second.MessageId!)).body.lease_expires_at;
    await sqs.send(
      new ChangeMessageVisibilityCommand({
        QueueUrl: url,
        ReceiptHandle: second.ReceiptHandle!,
        VisibilityTimeout: 3600,
      }),
    );
    const after = (await api(server.app).get(second.MessageId!)).body.lease_expires_at;
    expect(Date.parse(after) - Date.parse(before)).toBeGreaterThan(3_000_000);
    await sqs.send(new DeleteMessageCommand({ QueueUrl: url, ReceiptHandle: second.ReceiptHandle! }));
    expect((await api(server.app).get(second.MessageId!)).body.state).toBe('completed');
  });

  it('sends, receives, changes and deletes in batches', async () => {
    const url = await createQueue('sdk-batch');
    const sent = await sqs.send(
      new SendMessageBatchCommand({
        QueueUrl: url,
        Entries: Array.from({ length: 10 }, (_, i) => ({ Id: `m${i}`, MessageBody: `body ${i}` })),
      }),
    );
    expect(sent.Successful).toHaveLength(10);
    expect(sent.Failed ?? []).toEqual([]);
    const { Messages } = await sqs.send(
      new ReceiveMessageCommand({ QueueUrl: url, MaxNumberOfMessages: 10 }),
    );
    expect(Messages!.map((m) => m.Body).sort()).toEqual(
      Array.from({ length: 10 }, (_, i) => `body ${i}`).sort(),
    );
    const changed = await sqs.send(
      new ChangeMessageVisibilityBatchCommand({
        QueueUrl: url,
        Entries: Messages!.map((m, i) => ({
          Id: `c${i}`,
          ReceiptHandle: m.ReceiptHandle!,
          VisibilityTimeout: 120,
        })),
      }),
    );
    expect(changed.Successful).toHaveLength(10);
    const deleted = await sqs.send(
      new DeleteMessageBatchCommand({
        QueueUrl: url,
        Entries: Messages!.map((m, i) => ({ Id: `d${i}`, ReceiptHandle: m.ReceiptHandle! })),
      }),
    );
    expect(deleted.Successful).toHaveLength(10);
    expect(deleted.Failed ?? []).toEqual([]);
    const left = await api(server.app).call('GET', '/v1/queues/sdk-batch/jobs?state=completed');
    expect(left.body.jobs).toHaveLength(10);
  });

  it('serves message groups in turn (fair queues), and a limited queue holds receives back until a delete', async () => {
    const url = await createQueue('sdk-fair');
    await sqs.send(
      new SendMessageBatchCommand({
        QueueUrl: url,
        Entries: [
          ...Array.from({ length: 8 }, (_, i) => ({
            Id: `a${i}`,
            MessageBody: `a${i}`,
            MessageGroupId: 'tenant/a',
          })),
          { Id: 'b0', MessageBody: 'b0', MessageGroupId: 'tenant/b' },
        ],
      }),
    );
    // The message group is the job's group, shown by the native API too.
    const listed = await api(server.app).call('GET', '/v1/queues/sdk-fair/jobs?state=ready&group=tenant%2Fb');
    expect(listed.body.jobs).toHaveLength(1);
    await api(server.app).call('PUT', '/v1/queues/sdk-fair', { concurrency_limit: 2 });
    const first = await sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: url,
        MaxNumberOfMessages: 10,
        MessageSystemAttributeNames: ['All'],
      }),
    );
    // Two at most (the limit), one per group: tenant/b's one message is not stuck behind tenant/a's eight.
    expect(first.Messages!.map((m) => m.Attributes?.MessageGroupId).sort()).toEqual(['tenant/a', 'tenant/b']);
    const waiting = sqs.send(new ReceiveMessageCommand({ QueueUrl: url, WaitTimeSeconds: 20 }));
    await new Promise((r) => setTimeout(r, 300));
    await sqs.send(
      new DeleteMessageCommand({ QueueUrl: url, ReceiptHandle: first.Messages![0]!.ReceiptHandle! }),
    );
    expect((await waiting).Messages).toHaveLength(1);
  });

  it('tags, configures, purges and deletes a queue', async () => {
    const url = await createQueue('sdk-admin');
    await sqs.send(new TagQueueCommand({ QueueUrl: url, Tags: { team: 'billing', env: 'test' } }));
    await sqs.send(new UntagQueueCommand({ QueueUrl: url, TagKeys: ['env'] }));
    expect((await sqs.send(new ListQueueTagsCommand({ QueueUrl: url }))).Tags).toEqual({ team: 'billing' });
    await sqs.send(
      new SetQueueAttributesCommand({
        QueueUrl: url,
        Attributes: { ReceiveMessageWaitTimeSeconds: '2', VisibilityTimeout: '5' },
      }),
    );
    const { Attributes } = await sqs.send(
      new GetQueueAttributesCommand({
        QueueUrl: url,
        AttributeNames: ['ReceiveMessageWaitTimeSeconds', 'VisibilityTimeout'],
      }),
    );
    expect(Attributes).toEqual({ ReceiveMessageWaitTimeSeconds: '2', VisibilityTimeout: '5' });
    await sqs.send(new SendMessageCommand({ QueueUrl: url, MessageBody: 'purged' }));
    await sqs.send(new PurgeQueueCommand({ QueueUrl: url }));
    expect(
      (await api(server.app).call('GET', '/v1/queues/sdk-admin/jobs?state=cancelled')).body.jobs,
    ).toHaveLength(1);
    await sqs.send(new DeleteQueueCommand({ QueueUrl: url }));
    await expect(sqs.send(new GetQueueUrlCommand({ QueueName: 'sdk-admin' }))).rejects.toMatchObject({
      name: 'QueueDoesNotExist',
    });
  });
});
