import { realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { useListeningApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { clientEnvironment, found, run } from './aws-clients.js';

/**
 * A dead-letter queue redriven with the AWS CLI and with boto3, which no one here wrote: messages die
 * into the dead-letter queue, StartMessageMoveTask sends them back, ListMessageMoveTasks follows it,
 * and the leader does the work on its own tick. Every installation found runs; one too old to know
 * the move task actions (Debian 12's) is reported and passed over, but at least one must know them.
 */
const database = useTestDatabase();
const server = useListeningApp(database, { BATON_MAINTENANCE: 'true', BATON_TICK_MS: '200' });
const env = () => clientEnvironment(server.url, 'AKIAMOVES', 'moves-secret-not-checked');

async function eventually<T>(read: () => Promise<T>, done: (value: T) => boolean): Promise<T> {
  const deadline = Date.now() + 30_000;
  while (true) {
    const value = await read();
    if (done(value) || Date.now() > deadline) return value;
    await new Promise((r) => setTimeout(r, 200));
  }
}

describe('a DLQ redrive with the AWS CLI and boto3', () => {
  it('the AWS CLI: start-message-move-task, list-message-move-tasks, cancel-message-move-task', {
    timeout: 180_000,
  }, async () => {
    const clis = await found(['aws', '/usr/bin/aws'], ['--version']);
    expect(clis, 'no AWS CLI found: install the Debian package awscli (.ci/run does)').not.toEqual([]);
    const ran: string[] = [];
    for (const [n, cli] of clis.entries()) {
      const clientEnv = env();
      const aws = async (...args: string[]) => {
        const { stdout } = await run(cli.bin, ['sqs', ...args, '--endpoint-url', server.url], {
          env: clientEnv,
          timeout: 60_000,
        });
        return stdout.trim() === '' ? {} : JSON.parse(stdout);
      };
      const knows = await run(cli.bin, ['sqs', 'start-message-move-task', 'help'], { env: clientEnv }).then(
        () => true,
        () => false,
      );
      if (!knows) {
        console.info(`${cli.version.split(' ')[0]} has no start-message-move-task: passed over`);
        continue;
      }
      const dlq = `cli-move-${n}-dlq`;
      const dlqArn = `arn:aws:sqs:us-east-1:000000000000:${dlq}`;
      await aws('create-queue', '--queue-name', dlq);
      const policy = JSON.stringify({ deadLetterTargetArn: dlqArn, maxReceiveCount: 1 });
      const { QueueUrl } = await aws(
        'create-queue',
        '--queue-name',
        `cli-move-${n}-src`,
        '--attributes',
        JSON.stringify({ RedrivePolicy: policy }),
      );
      // Five messages, so that a task moving one a second is still running when it is cancelled.
      const entries = [0, 1, 2, 3, 4].map((i) => ({ Id: `m${i}`, MessageBody: `died once ${i}` }));
      await aws('send-message-batch', '--queue-url', QueueUrl, '--entries', JSON.stringify(entries));
      for (let left = entries.length; left > 0; ) {
        const { Messages = [] } = await aws(
          'receive-message',
          '--queue-url',
          QueueUrl,
          '--max-number-of-messages',
          '10',
          '--wait-time-seconds',
          '5',
        );
        const visible = Messages.map((m: { ReceiptHandle: string }, i: number) => ({
          Id: `v${i}`,
          ReceiptHandle: m.ReceiptHandle,
          VisibilityTimeout: 0,
        }));
        await aws(
          'change-message-visibility-batch',
          '--queue-url',
          QueueUrl,
          '--entries',
          JSON.stringify(visible),
        );
        left -= Messages.length;
      }
      const dlqUrl = `${server.url}/000000000000/${dlq}`;
      const inDlq = await eventually(
        () =>
          aws(
            'get-queue-attributes',
            '--queue-url',
            dlqUrl,
            '--attribute-names',
            'ApproximateNumberOfMessages',
          ),
        (r) => r.Attributes.ApproximateNumberOfMessages === '5',
      );
      expect(inDlq.Attributes.ApproximateNumberOfMessages, cli.version).toBe('5');

      // A slow task first, cancelled at once; then one that runs to the end.
      const slow = await aws(
        'start-message-move-task',
        '--source-arn',
        dlqArn,
        '--max-number-of-messages-per-second',
        '1',
      );
      const cancelled = await aws('cancel-message-move-task', '--task-handle', slow.TaskHandle);
      expect(cancelled.ApproximateNumberOfMessagesMoved, cli.version).toBeLessThan(5);
      await aws('start-message-move-task', '--source-arn', dlqArn);
      const listed = await eventually(
        () => aws('list-message-move-tasks', '--source-arn', dlqArn, '--max-results', '10'),
        (r) => r.Results[0].Status !== 'RUNNING',
      );
      expect(
        listed.Results.map((t: { Status: string }) => t.Status),
        cli.version,
      ).toEqual(['COMPLETED', 'CANCELLED']);
      expect(
        listed.Results[0].ApproximateNumberOfMessagesMoved + cancelled.ApproximateNumberOfMessagesMoved,
      ).toBe(5);
      const bodies: string[] = [];
      while (bodies.length < entries.length) {
        const { Messages = [] } = await aws(
          'receive-message',
          '--queue-url',
          QueueUrl,
          '--max-number-of-messages',
          '10',
          '--wait-time-seconds',
          '5',
        );
        bodies.push(...Messages.map((m: { Body: string }) => m.Body));
      }
      expect(bodies.sort(), cli.version).toEqual(entries.map((e) => e.MessageBody));
      ran.push(cli.version.split(' ')[0]!);
    }
    expect(ran, 'no AWS CLI here knows start-message-move-task').not.toEqual([]);
    console.info(`AWS CLI move tasks ran with: ${ran.join(', ')}`);
  });

  it('boto3: messages die into the DLQ, a move task sends them back, listed until it completes', {
    timeout: 180_000,
  }, async () => {
    const check = ['-c', 'import boto3, botocore; print(botocore.__version__)'];
    const pythons = await found(['python3', '/usr/bin/python3'], check);
    expect(pythons, 'no boto3 found: install the Debian package python3-boto3 (.ci/run does)').not.toEqual(
      [],
    );
    const script = realpathSync(fileURLToPath(new URL('./fixtures/boto3_move_task.py', import.meta.url)));
    const ran: string[] = [];
    for (const [n, python] of pythons.entries()) {
      const { stdout } = await run(python.bin, [script], {
        env: { ...env(), PREFIX: `boto3-move-${n}` },
        timeout: 120_000,
      });
      const out = JSON.parse(stdout);
      if (out.unsupported) {
        console.info(`botocore ${out.unsupported} has no start_message_move_task: passed over`);
        continue;
      }
      const dlqArn = `arn:aws:sqs:us-east-1:000000000000:boto3-move-${n}-dlq`;
      expect(out, python.version).toEqual({
        botocore: expect.any(String),
        second_start: 'AWS.SimpleQueueService.UnsupportedOperation',
        tasks: [
          {
            Status: 'COMPLETED',
            SourceArn: dlqArn,
            ApproximateNumberOfMessagesMoved: 3,
            ApproximateNumberOfMessagesToMove: 3,
            TaskHandle: null,
          },
        ],
        back: [
          ['one', '1'],
          ['three', '1'],
          ['two', '1'],
        ],
        cancel_finished: 'AWS.SimpleQueueService.UnsupportedOperation',
      });
      ran.push(out.botocore);
    }
    expect(ran, 'no boto3 here knows start_message_move_task').not.toEqual([]);
    console.info(`boto3 move tasks ran with botocore ${ran.join(', ')}`);
  });
});
