import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import {
  CreateQueueCommand,
  GetQueueAttributesCommand,
  type Message,
  SendMessageBatchCommand,
  SendMessageCommand,
} from '@aws-sdk/client-sqs';
import { Consumer } from 'sqs-consumer';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { useListeningApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { api } from '../support/http.js';
import { until } from '../support/until.js';
import { sqsClient } from './support.js';

/**
 * sqs-consumer (unmodified) as the worker, on the AWS SDK, against a real server with its leader
 * running (a short tick, so expired visibility timeouts come back quickly): plain processing, a
 * heartbeat that keeps a slow message invisible, a worker killed mid-message (the message comes
 * back after its visibility timeout), and poison messages that land in the dead-letter queue after
 * maxReceiveCount receives.
 */
const database = useTestDatabase();
const server = useListeningApp(database, { BATON_MAINTENANCE: 'true', BATON_TICK_MS: '200' });
let sqs: ReturnType<typeof sqsClient>;
const consumers: Consumer[] = [];
beforeAll(() => {
  sqs = sqsClient(server.url);
});
afterEach(() => {
  for (const consumer of consumers.splice(0)) consumer.stop({ abort: true });
});
afterAll(() => sqs?.destroy());

async function createQueue(name: string, attributes: Record<string, string> = {}): Promise<string> {
  return (await sqs.send(new CreateQueueCommand({ QueueName: name, Attributes: attributes }))).QueueUrl!;
}

function consume(
  queueUrl: string,
  handle: (m: Message) => Promise<void>,
  options: Partial<ConstructorParameters<typeof Consumer>[0]> = {},
) {
  const consumer = Consumer.create({
    queueUrl,
    sqs,
    waitTimeSeconds: 1,
    messageSystemAttributeNames: ['ApproximateReceiveCount'],
    handleMessage: async (m) => {
      await handle(m);
      return m;
    },
    ...options,
  });
  consumer.on('error', () => {});
  consumer.on('processing_error', () => {});
  consumers.push(consumer);
  consumer.start();
  return consumer;
}

describe('sqs-consumer on Baton', () => {
  it('processes and deletes every message', async () => {
    const url = await createQueue('consumer-plain');
    for (const batch of [0, 1]) {
      await sqs.send(
        new SendMessageBatchCommand({
          QueueUrl: url,
          Entries: Array.from({ length: 10 }, (_, i) => ({
            Id: `m${i}`,
            MessageBody: `job ${batch * 10 + i}`,
          })),
        }),
      );
    }
    const seen: string[] = [];
    consume(url, async (m) => void seen.push(m.Body!), { batchSize: 10 });
    await until(async () => {
      const done = await api(server.app).call(
        'GET',
        '/v1/queues/consumer-plain/jobs?state=completed&limit=100',
      );
      return done.body.jobs.length === 20;
    });
    expect(seen.sort()).toEqual(Array.from({ length: 20 }, (_, i) => `job ${i}`).sort());
  });

  it('a heartbeat keeps a slow message from coming back while it is handled', async () => {
    const url = await createQueue('consumer-heartbeat', { VisibilityTimeout: '1' });
    const { MessageId } = await sqs.send(new SendMessageCommand({ QueueUrl: url, MessageBody: 'slow' }));
    const receives: string[] = [];
    consume(
      url,
      async (m) => {
        receives.push(m.Attributes!.ApproximateReceiveCount!);
        await new Promise((r) => setTimeout(r, 3500));
      },
      { visibilityTimeout: 1, heartbeatInterval: 0.4 as number },
    );
    await until(async () => (await api(server.app).get(MessageId!)).body.state === 'completed');
    expect(receives).toEqual(['1']);
    expect((await api(server.app).get(MessageId!)).body.attempts).toBe(1);
  });

  it('a worker killed mid-message: the message comes back after the visibility timeout', async () => {
    const url = await createQueue('consumer-crash', { VisibilityTimeout: '1' });
    const { MessageId } = await sqs.send(new SendMessageCommand({ QueueUrl: url, MessageBody: 'survives' }));
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', fileURLToPath(new URL('./fixtures/crashing-consumer.ts', import.meta.url))],
      {
        env: { ...process.env, SQS_ENDPOINT: server.url, QUEUE_URL: url },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let output = '';
    child.stdout.on('data', (c) => {
      output += c;
    });
    child.stderr.on('data', (c) => {
      output += c;
    });
    const signal = await new Promise<NodeJS.Signals | null>((resolve) =>
      child.on('exit', (_code, sig) => resolve(sig)),
    );
    expect(output).toContain(`got ${MessageId}`);
    expect(signal).toBe('SIGKILL');

    const received: Message[] = [];
    consume(url, async (m) => void received.push(m));
    await until(async () => (await api(server.app).get(MessageId!)).body.state === 'completed');
    expect(received.map((m) => [m.MessageId, m.Body, m.Attributes?.ApproximateReceiveCount])).toEqual([
      [MessageId, 'survives', '2'],
    ]);
    const job = (await api(server.app).get(MessageId!)).body;
    expect(job.errors.map((e: { message: string }) => e.message)).toEqual(['lease expired']);
  });

  it('poison messages land in the dead-letter queue after maxReceiveCount receives', async () => {
    const dlq = await createQueue('consumer-poison-dlq');
    const { Attributes } = await sqs.send(
      new GetQueueAttributesCommand({ QueueUrl: dlq, AttributeNames: ['QueueArn'] }),
    );
    const redrive = JSON.stringify({ deadLetterTargetArn: Attributes!.QueueArn, maxReceiveCount: 2 });
    // Two sources: one whose worker lets the visibility time out, one whose worker gives the message
    // back at once (terminateVisibilityTimeout: ChangeMessageVisibility to 0). Both count receives.
    const attempts = new Map<string, number>();
    const sent: string[] = [];
    for (const [name, options] of [
      ['consumer-poison-timeout', {}],
      ['consumer-poison-release', { terminateVisibilityTimeout: true }],
    ] as const) {
      const url = await createQueue(name, { VisibilityTimeout: '1', RedrivePolicy: redrive });
      const { MessageId } = await sqs.send(
        new SendMessageCommand({
          QueueUrl: url,
          MessageBody: `poison from ${name}`,
          MessageAttributes: { source: { DataType: 'String', StringValue: name } },
        }),
      );
      sent.push(MessageId!);
      consume(
        url,
        async (m) => {
          attempts.set(m.MessageId!, (attempts.get(m.MessageId!) ?? 0) + 1);
          throw new Error('cannot process this');
        },
        options,
      );
    }
    const landed: Message[] = [];
    consume(dlq, async (m) => void landed.push(m), { messageAttributeNames: ['All'] });
    await until(() => landed.length === 2, 30_000);
    expect(landed.map((m) => m.MessageId).sort()).toEqual([...sent].sort());
    expect(landed.map((m) => m.MessageAttributes?.source?.StringValue).sort()).toEqual([
      'consumer-poison-release',
      'consumer-poison-timeout',
    ]);
    expect(landed.map((m) => m.Body).sort()).toEqual([
      'poison from consumer-poison-release',
      'poison from consumer-poison-timeout',
    ]);
    expect(sent.map((id) => attempts.get(id))).toEqual([2, 2]);
    await until(async () => (await api(server.app).get(sent[0]!)).body.state === 'completed');
    expect((await api(server.app).get(sent[0]!)).body.queue).toBe('consumer-poison-dlq');
  });
  it('on a FIFO queue handles each group in order, one message of a group at a time, retries in place', async () => {
    const url = await createQueue('consumer-order.fifo', {
      FifoQueue: 'true',
      ContentBasedDeduplication: 'true',
    });
    const GROUPS = 5;
    const PER_GROUP = 8;
    const sent: Record<string, string[]> = {};
    const entries: { group: string; body: string }[] = [];
    for (let i = 0; i < PER_GROUP; i++) {
      for (let g = 0; g < GROUPS; g++) {
        const group = `customer-${g}`;
        sent[group] = [...(sent[group] ?? []), `${group} #${i}`];
        entries.push({ group, body: `${group} #${i}` });
      }
    }
    for (let start = 0; start < entries.length; start += 10) {
      await sqs.send(
        new SendMessageBatchCommand({
          QueueUrl: url,
          Entries: entries
            .slice(start, start + 10)
            .map((e, i) => ({ Id: `m${i}`, MessageBody: e.body, MessageGroupId: e.group })),
        }),
      );
    }
    // Each message #3 fails on its first attempt and is given back at once (terminateVisibilityTimeout).
    const handled: Record<string, string[]> = {};
    const active = new Set<string>();
    const overlaps: string[] = [];
    const failedOnce = new Set<string>();
    // sqs-consumer handles the messages of one receive at the same time (it warns about FIFO queues
    // for that reason): a receive may hold several messages of a group, in order, as SQS returns them,
    // so it takes one message per receive here, and three consumers share the queue.
    const handler = async (m: Message) => {
      const group = m.Attributes!.MessageGroupId!;
      if (active.has(group)) overlaps.push(group);
      active.add(group);
      try {
        await new Promise((r) => setTimeout(r, Math.random() * 20));
        if (m.Body!.endsWith('#3') && !failedOnce.has(m.Body!)) {
          failedOnce.add(m.Body!);
          throw new Error('first attempt fails');
        }
        handled[group] = [...(handled[group] ?? []), m.Body!];
      } finally {
        active.delete(group);
      }
    };
    for (let i = 0; i < 3; i++) {
      consume(url, handler, {
        batchSize: 1,
        suppressFifoWarning: true,
        terminateVisibilityTimeout: true,
        messageSystemAttributeNames: ['MessageGroupId', 'SequenceNumber'],
      });
    }
    await until(async () => {
      const done = await api(server.app).call(
        'GET',
        '/v1/queues/consumer-order.fifo/jobs?state=completed&limit=100',
      );
      return done.body.jobs.length === GROUPS * PER_GROUP;
    }, 30_000);
    expect(handled).toEqual(sent);
    expect(overlaps).toEqual([]);
    expect(failedOnce.size).toBe(GROUPS);
  });
});
