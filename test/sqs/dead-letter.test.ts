import {
  ChangeMessageVisibilityCommand,
  CreateQueueCommand,
  DeleteQueueCommand,
  GetQueueAttributesCommand,
  ReceiveMessageCommand,
  SendMessageCommand,
  SetQueueAttributesCommand,
} from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { useListeningApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { api } from '../support/http.js';
import { sqsClient } from './support.js';

/**
 * RedrivePolicy: maxReceiveCount is the queue's max_attempts, and the leader's dead-letter duty
 * moves dead messages to deadLetterTargetArn. The maintenance duties are run by hand here
 * (runOnce) rather than on their timers, so each step is seen. The queue counts of
 * GetQueueAttributes are the leader's statistics.
 */
const database = useTestDatabase();
const server = useListeningApp(database, { BATON_MAINTENANCE: 'true', BATON_TICK_MS: '600000' });
let sqs: ReturnType<typeof sqsClient>;
beforeAll(() => {
  sqs = sqsClient(server.url);
});
afterAll(() => sqs?.destroy());

const runDuties = async () => {
  await server.app.maintainer!.runOnce();
};

async function counts(url: string) {
  const { Attributes } = await sqs.send(
    new GetQueueAttributesCommand({
      QueueUrl: url,
      AttributeNames: [
        'ApproximateNumberOfMessages',
        'ApproximateNumberOfMessagesNotVisible',
        'ApproximateNumberOfMessagesDelayed',
      ],
    }),
  );
  return [
    Attributes!.ApproximateNumberOfMessages,
    Attributes!.ApproximateNumberOfMessagesNotVisible,
    Attributes!.ApproximateNumberOfMessagesDelayed,
  ].map(Number);
}

/** Receive the one message of a queue and give it back at once: one receive counted. */
async function receiveAndRelease(url: string) {
  const [m] = (await sqs.send(new ReceiveMessageCommand({ QueueUrl: url }))).Messages!;
  await sqs.send(
    new ChangeMessageVisibilityCommand({
      QueueUrl: url,
      ReceiptHandle: m!.ReceiptHandle!,
      VisibilityTimeout: 0,
    }),
  );
  return m!;
}

describe('dead-letter queues', () => {
  it('a message received maxReceiveCount times moves to the dead-letter queue, same id and body', async () => {
    const dlq = (await sqs.send(new CreateQueueCommand({ QueueName: 'dl-target' }))).QueueUrl!;
    const redrive = JSON.stringify({
      deadLetterTargetArn: 'arn:aws:sqs:us-east-1:000000000000:dl-target',
      maxReceiveCount: 2,
    });
    const source = (
      await sqs.send(
        new CreateQueueCommand({ QueueName: 'dl-source', Attributes: { RedrivePolicy: redrive } }),
      )
    ).QueueUrl!;
    expect((await api(server.app).call('GET', '/v1/queues/dl-source')).body.max_attempts).toBe(2);
    const { Attributes } = await sqs.send(
      new GetQueueAttributesCommand({ QueueUrl: source, AttributeNames: ['RedrivePolicy'] }),
    );
    expect(JSON.parse(Attributes!.RedrivePolicy!)).toEqual(JSON.parse(redrive));

    const { MessageId } = await sqs.send(
      new SendMessageCommand({ QueueUrl: source, MessageBody: 'poison', DelaySeconds: 0 }),
    );
    await sqs.send(new SendMessageCommand({ QueueUrl: source, MessageBody: 'later', DelaySeconds: 600 }));
    await runDuties();
    expect(await counts(source)).toEqual([1, 0, 1]);

    await receiveAndRelease(source);
    await runDuties();
    expect((await api(server.app).get(MessageId!)).body).toMatchObject({
      queue: 'dl-source',
      state: 'ready',
      attempts: 1,
    });
    await receiveAndRelease(source);
    // The second receive was the last allowed: dead, and on the next duty run, in the target queue.
    expect((await api(server.app).get(MessageId!)).body).toMatchObject({
      state: 'dead',
      dead_reason: 'attempts_exhausted',
    });
    await runDuties();
    await runDuties();
    expect((await api(server.app).get(MessageId!)).body).toMatchObject({
      queue: 'dl-target',
      state: 'ready',
      attempts: 0,
    });
    expect(await counts(dlq)).toEqual([1, 0, 0]);
    const [moved] = (await sqs.send(new ReceiveMessageCommand({ QueueUrl: dlq }))).Messages!;
    expect([moved!.MessageId, moved!.Body]).toEqual([MessageId, 'poison']);
  });

  it('removing the RedrivePolicy restores unbounded (1000) receives and stops forwarding', async () => {
    await sqs.send(new CreateQueueCommand({ QueueName: 'dl-target-2' }));
    const redrive = JSON.stringify({
      deadLetterTargetArn: 'arn:aws:sqs:us-east-1:000000000000:dl-target-2',
      maxReceiveCount: 1,
    });
    const source = (
      await sqs.send(
        new CreateQueueCommand({ QueueName: 'dl-source-2', Attributes: { RedrivePolicy: redrive } }),
      )
    ).QueueUrl!;
    await sqs.send(new SetQueueAttributesCommand({ QueueUrl: source, Attributes: { RedrivePolicy: '' } }));
    expect((await api(server.app).call('GET', '/v1/queues/dl-source-2')).body.max_attempts).toBe(1000);
    const { Attributes } = await sqs.send(
      new GetQueueAttributesCommand({ QueueUrl: source, AttributeNames: ['All'] }),
    );
    expect(Attributes!.RedrivePolicy).toBeUndefined();
  });

  it('a dead-letter queue that was deleted: the dead messages stay where they are, the duty carries on', async () => {
    await sqs.send(new CreateQueueCommand({ QueueName: 'dl-gone' }));
    const redrive = JSON.stringify({
      deadLetterTargetArn: 'arn:aws:sqs:us-east-1:000000000000:dl-gone',
      maxReceiveCount: 1,
    });
    const source = (
      await sqs.send(
        new CreateQueueCommand({ QueueName: 'dl-source-3', Attributes: { RedrivePolicy: redrive } }),
      )
    ).QueueUrl!;
    await sqs.send(new DeleteQueueCommand({ QueueUrl: `${server.url}/000000000000/dl-gone` }));
    const { MessageId } = await sqs.send(new SendMessageCommand({ QueueUrl: source, MessageBody: 'stays' }));
    await receiveAndRelease(source);
    const results = await server.app.maintainer!.runOnce();
    expect(results.sqs_dead_letter).toEqual({ moved: 0 });
    expect((await api(server.app).get(MessageId!)).body).toMatchObject({
      queue: 'dl-source-3',
      state: 'dead',
    });
  });

  it('the move marks the dead-letter queue grouped when the messages moved have a group, and only then', async () => {
    const native = api(server.app);
    const forward = async (source: string, target: string, group?: string) => {
      await sqs.send(new CreateQueueCommand({ QueueName: target }));
      const redrive = JSON.stringify({
        deadLetterTargetArn: `arn:aws:sqs:us-east-1:000000000000:${target}`,
        maxReceiveCount: 1,
      });
      const url = (
        await sqs.send(new CreateQueueCommand({ QueueName: source, Attributes: { RedrivePolicy: redrive } }))
      ).QueueUrl!;
      await sqs.send(
        new SendMessageCommand({
          QueueUrl: url,
          MessageBody: 'poison',
          ...(group === undefined ? {} : { MessageGroupId: group }),
        }),
      );
      await receiveAndRelease(url);
    };
    // A standard queue's MessageGroupId (fair queues) is the job's group; a message without one has none.
    await forward('dl-fair-source', 'dl-fair-target', 'tenant-1');
    await forward('dl-plain-source', 'dl-plain-target');
    expect((await native.call('GET', '/v1/queues/dl-fair-target')).body.grouped).toBe(false);
    // The dead-letter duty alone: the group-stats duty, which would mark the queue later, does not run.
    const duty = server.app.maintainer!.duties.find((d) => d.name === 'sqs_dead_letter')!;
    expect(await duty.runOnce()).toEqual({ moved: 2 });
    expect((await native.call('GET', '/v1/queues/dl-fair-target')).body.grouped).toBe(true);
    expect((await native.call('GET', '/v1/queues/dl-plain-target')).body.grouped).toBe(false);
  });
});
