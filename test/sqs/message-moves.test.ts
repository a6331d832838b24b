import {
  CancelMessageMoveTaskCommand,
  ChangeMessageVisibilityCommand,
  CreateQueueCommand,
  DeleteQueueCommand,
  ListMessageMoveTasksCommand,
  ReceiveMessageCommand,
  SendMessageCommand,
  StartMessageMoveTaskCommand,
} from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { useListeningApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { api } from '../support/http.js';
import { failure, sqsClient } from './support.js';

/**
 * Message move tasks with the AWS SDK: the messages a RedrivePolicy forwarded to a dead-letter
 * queue go back to the queue they died in (or to a named queue), as SQS's console "Start DLQ
 * redrive" does. The leader's duties are run by hand (runOnce), so each step is seen.
 */
const database = useTestDatabase();
const server = useListeningApp(database, { BATON_MAINTENANCE: 'true', BATON_TICK_MS: '600000' });
let sqs: ReturnType<typeof sqsClient>;
beforeAll(() => {
  sqs = sqsClient(server.url);
});
afterAll(() => sqs?.destroy());

const arn = (queue: string) => `arn:aws:sqs:us-east-1:000000000000:${queue}`;
const urlOf = (queue: string) => `${server.url}/000000000000/${queue}`;
const runDuties = () => server.app.maintainer!.runOnce();

/** A source queue whose messages die on their first receive, into `dlq`. */
async function sourceInto(source: string, dlq: string) {
  await sqs.send(new CreateQueueCommand({ QueueName: dlq }));
  const RedrivePolicy = JSON.stringify({ deadLetterTargetArn: arn(dlq), maxReceiveCount: 1 });
  await sqs.send(new CreateQueueCommand({ QueueName: source, Attributes: { RedrivePolicy } }));
}

/** Send `bodies` to `source`, receive each once and make it visible again: dead, then forwarded. */
async function killInto(source: string, bodies: string[]): Promise<string[]> {
  const ids: string[] = [];
  for (const body of bodies) {
    ids.push(
      (await sqs.send(new SendMessageCommand({ QueueUrl: urlOf(source), MessageBody: body }))).MessageId!,
    );
  }
  for (let left = bodies.length; left > 0; ) {
    const { Messages = [] } = await sqs.send(
      new ReceiveMessageCommand({ QueueUrl: urlOf(source), MaxNumberOfMessages: 10 }),
    );
    for (const m of Messages) {
      await sqs.send(
        new ChangeMessageVisibilityCommand({
          QueueUrl: urlOf(source),
          ReceiptHandle: m.ReceiptHandle!,
          VisibilityTimeout: 0,
        }),
      );
    }
    left -= Messages.length;
  }
  await runDuties();
  return ids;
}

async function receiveAll(queue: string) {
  const out: { id: string; body: string; count: string; source?: string }[] = [];
  while (true) {
    const { Messages = [] } = await sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: urlOf(queue),
        MaxNumberOfMessages: 10,
        MessageSystemAttributeNames: ['All'],
      }),
    );
    if (Messages.length === 0) return out.sort((a, b) => a.body.localeCompare(b.body));
    for (const m of Messages) {
      out.push({
        id: m.MessageId!,
        body: m.Body!,
        count: m.Attributes!.ApproximateReceiveCount!,
        ...(m.Attributes!.DeadLetterQueueSourceArn ? { source: m.Attributes!.DeadLetterQueueSourceArn } : {}),
      });
    }
  }
}

const tasks = async (queue: string, MaxResults?: number) =>
  (
    await sqs.send(
      new ListMessageMoveTasksCommand({ SourceArn: arn(queue), ...(MaxResults ? { MaxResults } : {}) }),
    )
  ).Results ?? [];

describe('message move tasks', () => {
  it('sends the messages of a dead-letter queue back to the queue they died in, receive counts reset', async () => {
    await sourceInto('mv-src', 'mv-dlq');
    const ids = await killInto('mv-src', ['a', 'b', 'c']);
    const native = api(server.app);
    for (const id of ids)
      expect((await native.get(id)).body).toMatchObject({ queue: 'mv-dlq', state: 'ready' });

    const { TaskHandle } = await sqs.send(new StartMessageMoveTaskCommand({ SourceArn: arn('mv-dlq') }));
    expect(TaskHandle).toEqual(expect.any(String));
    expect(await tasks('mv-dlq')).toEqual([
      expect.objectContaining({
        TaskHandle,
        Status: 'RUNNING',
        SourceArn: arn('mv-dlq'),
        ApproximateNumberOfMessagesMoved: 0,
        ApproximateNumberOfMessagesToMove: 3,
        StartedTimestamp: expect.any(Number),
      }),
    ]);
    await runDuties();
    const [done] = await tasks('mv-dlq');
    expect(done).toMatchObject({ Status: 'COMPLETED', ApproximateNumberOfMessagesMoved: 3 });
    expect(done!.TaskHandle).toBeUndefined();
    expect(done!.DestinationArn).toBeUndefined();

    // The same messages, back where they died, received as if new; the dead-letter queue is empty.
    expect(await receiveAll('mv-src')).toEqual(
      ['a', 'b', 'c'].map((body, i) => ({ id: ids[i], body, count: '1' })),
    );
    expect(await receiveAll('mv-dlq')).toEqual([]);
  });

  it('a message in a dead-letter queue names the queue it died in (DeadLetterQueueSourceArn)', async () => {
    await sourceInto('mv-src-attr', 'mv-dlq-attr');
    const [id] = await killInto('mv-src-attr', ['x']);
    expect(await receiveAll('mv-dlq-attr')).toEqual([
      { id, body: 'x', count: '1', source: arn('mv-src-attr') },
    ]);
  });

  it('DestinationArn sends them all to one queue; messages that arrive after the start stay', async () => {
    await sourceInto('mv-src-2', 'mv-dlq-2');
    await sqs.send(new CreateQueueCommand({ QueueName: 'mv-elsewhere' }));
    await killInto('mv-src-2', ['first', 'second']);
    await sqs.send(
      new StartMessageMoveTaskCommand({ SourceArn: arn('mv-dlq-2'), DestinationArn: arn('mv-elsewhere') }),
    );
    // Dies after the task started: not the task's to move.
    await new Promise((r) => setTimeout(r, 10));
    await killInto('mv-src-2', ['late']);
    await runDuties();
    expect(await tasks('mv-dlq-2')).toEqual([
      expect.objectContaining({
        Status: 'COMPLETED',
        DestinationArn: arn('mv-elsewhere'),
        ApproximateNumberOfMessagesMoved: 2,
        ApproximateNumberOfMessagesToMove: 2,
      }),
    ]);
    expect((await receiveAll('mv-elsewhere')).map((m) => m.body)).toEqual(['first', 'second']);
    expect((await receiveAll('mv-dlq-2')).map((m) => m.body)).toEqual(['late']);
  });

  it('one task of a queue at a time; a cancel keeps what moved and answers how many; tasks listed latest first', async () => {
    await sourceInto('mv-src-3', 'mv-dlq-3');
    await killInto('mv-src-3', ['1', '2', '3', '4']);
    const { TaskHandle } = await sqs.send(
      new StartMessageMoveTaskCommand({ SourceArn: arn('mv-dlq-3'), MaxNumberOfMessagesPerSecond: 1 }),
    );
    const second = await failure(sqs.send(new StartMessageMoveTaskCommand({ SourceArn: arn('mv-dlq-3') })));
    expect(second.name).toBe('UnsupportedOperation');
    // A rate of 1 a second: after about 1.2 s, one batch of one.
    await new Promise((r) => setTimeout(r, 1200));
    await runDuties();
    const cancelled = await sqs.send(new CancelMessageMoveTaskCommand({ TaskHandle }));
    expect(cancelled.ApproximateNumberOfMessagesMoved).toBe(1);
    expect((await receiveAll('mv-src-3')).length).toBe(1);
    const again = await failure(sqs.send(new CancelMessageMoveTaskCommand({ TaskHandle })));
    expect(again.name).toBe('UnsupportedOperation');

    // Once cancelled, another may start; it moves the rest.
    await sqs.send(new StartMessageMoveTaskCommand({ SourceArn: arn('mv-dlq-3') }));
    await runDuties();
    const listed = await tasks('mv-dlq-3', 10);
    expect(
      listed.map((t) => [t.Status, t.ApproximateNumberOfMessagesMoved, t.MaxNumberOfMessagesPerSecond]),
    ).toEqual([
      ['COMPLETED', 3, undefined],
      ['CANCELLED', 1, 1],
    ]);
    expect((await tasks('mv-dlq-3')).length).toBe(1);
  });

  it('refuses what SQS refuses, with its errors', async () => {
    await sourceInto('mv-src-4', 'mv-dlq-4');
    const notDlq = await failure(sqs.send(new StartMessageMoveTaskCommand({ SourceArn: arn('mv-src-4') })));
    expect([notDlq.name, notDlq.message]).toEqual([
      'InvalidParameterValue',
      expect.stringContaining('Source queue must be configured as a Dead Letter Queue'),
    ]);
    const missing = await failure(
      sqs.send(new StartMessageMoveTaskCommand({ SourceArn: arn('mv-nowhere') })),
    );
    expect(missing.name).toBe('ResourceNotFoundException');
    const toItself = await failure(
      sqs.send(
        new StartMessageMoveTaskCommand({ SourceArn: arn('mv-dlq-4'), DestinationArn: arn('mv-dlq-4') }),
      ),
    );
    expect(toItself.name).toBe('InvalidParameterValue');
    const rate = await failure(
      sqs.send(
        new StartMessageMoveTaskCommand({ SourceArn: arn('mv-dlq-4'), MaxNumberOfMessagesPerSecond: 501 }),
      ),
    );
    expect(rate.name).toBe('InvalidParameterValue');
    const fifo = await sqs.send(
      new CreateQueueCommand({ QueueName: 'mv-fifo.fifo', Attributes: { FifoQueue: 'true' } }),
    );
    expect(fifo.QueueUrl).toBeDefined();
    const kind = await failure(
      sqs.send(
        new StartMessageMoveTaskCommand({ SourceArn: arn('mv-dlq-4'), DestinationArn: arn('mv-fifo.fifo') }),
      ),
    );
    expect([kind.name, kind.message]).toEqual([
      'InvalidParameterValue',
      expect.stringContaining('same type'),
    ]);
    for (const TaskHandle of ['not-a-handle', Buffer.from('{"taskId":"x"}').toString('base64')]) {
      const bad = await failure(sqs.send(new CancelMessageMoveTaskCommand({ TaskHandle })));
      expect(bad.name).toBe('ResourceNotFoundException');
    }
    const unknown = Buffer.from(
      JSON.stringify({ taskId: '00000000-0000-4000-8000-000000000000', sourceArn: arn('mv-dlq-4') }),
    ).toString('base64');
    expect((await failure(sqs.send(new CancelMessageMoveTaskCommand({ TaskHandle: unknown })))).name).toBe(
      'ResourceNotFoundException',
    );
    expect(await tasks('mv-dlq-4')).toEqual([]);
  });

  it('a task whose destination queue is deleted fails with a reason, and the messages stay', async () => {
    await sourceInto('mv-src-5', 'mv-dlq-5');
    await sqs.send(new CreateQueueCommand({ QueueName: 'mv-doomed' }));
    await killInto('mv-src-5', ['stay']);
    await sqs.send(
      new StartMessageMoveTaskCommand({ SourceArn: arn('mv-dlq-5'), DestinationArn: arn('mv-doomed') }),
    );
    await sqs.send(new DeleteQueueCommand({ QueueUrl: urlOf('mv-doomed') }));
    await runDuties();
    const [task] = await tasks('mv-dlq-5');
    expect(task).toMatchObject({ Status: 'FAILED', ApproximateNumberOfMessagesMoved: 0 });
    expect(task!.FailureReason).toContain('mv-doomed');
    expect((await receiveAll('mv-dlq-5')).map((m) => m.body)).toEqual(['stay']);
  });
});
