import { realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type BatonApp, buildApp } from '../../src/app.js';
import { sha256 } from '../../src/auth/api-keys.js';
import { md5OfAttributes } from '../../src/sqs/md5.js';
import { listen, testConfig } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { clientEnvironment, found, run } from './aws-clients.js';

/**
 * The AWS CLI and boto3, which no one here wrote, against a server that requires signed requests.
 * Every installation found is run: the ones on PATH (these machines ship the AWS CLI 1.45 and
 * boto3 1.43 in their Python, which speak the JSON protocol) and Debian's packages (`awscli`,
 * `python3-boto3` in /usr/bin; Debian 12's speak the query protocol), which .ci/run installs when
 * none is on PATH. Finding neither is a failure, never a skip.
 */
const database = useTestDatabase();

const ACCESS_KEY = 'AKIABATONCLI';
const SECRET = 'cli-secret-access-key-0123456789abcdef';
let app: BatonApp;
let url: string;
let env: ReturnType<typeof clientEnvironment>;
const clientEnv = () => env;

/** Baton's own API, with the bearer key of the same API key, to see what the clients did. */
async function native(url: string) {
  const res = await app.inject({ method: 'GET', url, headers: { authorization: 'Bearer cli-bearer' } });
  return res.json();
}

beforeAll(async () => {
  const config = testConfig({
    BATON_API_KEYS: JSON.stringify([
      { name: 'cli', sha256: sha256('cli-bearer').toString('hex'), scopes: ['admin'] },
    ]),
    BATON_SQS_CREDENTIALS: JSON.stringify([
      { access_key_id: ACCESS_KEY, secret_access_key: SECRET, api_key: 'cli' },
    ]),
  });
  app = await buildApp({ config, databaseUrl: database.url });
  await app.ready();
  url = await listen(app);
  env = clientEnvironment(url, ACCESS_KEY, SECRET);
});
afterAll(async () => {
  await app?.close();
});

describe('the AWS CLI', () => {
  it('creates a queue, sends, receives and deletes a message (every aws found)', {
    timeout: 180_000,
  }, async () => {
    const clis = await found(['aws', '/usr/bin/aws'], ['--version']);
    expect(clis, 'no AWS CLI found: install the Debian package awscli (.ci/run does)').not.toEqual([]);
    for (const [n, cli] of clis.entries()) {
      const aws = async (...args: string[]) => {
        const { stdout } = await run(cli.bin, ['sqs', ...args, '--endpoint-url', url], {
          env: clientEnv(),
          timeout: 60_000,
        });
        return stdout.trim() === '' ? {} : JSON.parse(stdout);
      };
      const queue = `cli-queue-${n}`;
      const { QueueUrl } = await aws('create-queue', '--queue-name', queue);
      expect(QueueUrl, cli.version).toBe(`${url}/000000000000/${queue}`);
      const sent = await aws(
        'send-message',
        '--queue-url',
        QueueUrl,
        '--message-body',
        'hello from the aws cli',
        '--message-attributes',
        '{"colour": {"DataType": "String", "StringValue": "blue"}}',
      );
      expect(sent.MD5OfMessageAttributes, cli.version).toBe(
        md5OfAttributes({ colour: { DataType: 'String', StringValue: 'blue' } }),
      );
      const received = await aws(
        'receive-message',
        '--queue-url',
        QueueUrl,
        '--wait-time-seconds',
        '5',
        '--attribute-names',
        'All',
        '--message-attribute-names',
        'All',
      );
      const [message] = received.Messages;
      expect(message, cli.version).toMatchObject({
        MessageId: sent.MessageId,
        Body: 'hello from the aws cli',
        MD5OfBody: sent.MD5OfMessageBody,
        MessageAttributes: { colour: { DataType: 'String', StringValue: 'blue' } },
        Attributes: { ApproximateReceiveCount: '1', SenderId: ACCESS_KEY },
      });
      await aws('delete-message', '--queue-url', QueueUrl, '--receipt-handle', message.ReceiptHandle);
      expect((await native(`/v1/jobs/${sent.MessageId}`)).state, cli.version).toBe('completed');
      const { Attributes } = await aws(
        'get-queue-attributes',
        '--queue-url',
        QueueUrl,
        '--attribute-names',
        'All',
      );
      expect(Attributes.QueueArn, cli.version).toBe(`arn:aws:sqs:us-east-1:000000000000:${queue}`);
    }
    console.info(`AWS CLI runs: ${clis.map((c) => c.version.split(' ')[0]).join(', ')}`);
  });
});

describe('boto3', () => {
  it('a short boto3 program: batch send, receive with attributes, batch delete, a modelled error, a FIFO queue, a receive sent again', {
    timeout: 180_000,
  }, async () => {
    const check = ['-c', 'import boto3, botocore; print(botocore.__version__)'];
    const pythons = await found(['python3', '/usr/bin/python3'], check);
    expect(pythons, 'no boto3 found: install the Debian package python3-boto3 (.ci/run does)').not.toEqual(
      [],
    );
    const script = realpathSync(fileURLToPath(new URL('./fixtures/boto3_roundtrip.py', import.meta.url)));
    const protocols: string[] = [];
    for (const [n, python] of pythons.entries()) {
      const { stdout } = await run(python.bin, [script], {
        env: { ...clientEnv(), QUEUE_NAME: `boto3-queue-${n}` },
        timeout: 120_000,
      });
      const out = JSON.parse(stdout);
      protocols.push(`${out.botocore}:${out.protocol}`);
      const bodies = ['boto3 line\r\nbreaks & <xml> chars', 'boto3 plain', 'boto3 ünïcödé 😀'];
      expect(out, python.version).toMatchObject({
        queue_url: `${url}/000000000000/boto3-queue-${n}`,
        sent: ['e0', 'e1', 'e2'],
        bodies,
        binary: [
          [0, 0, 255],
          [1, 0, 255],
          [2, 0, 255],
        ],
        receive_counts: ['1', '1', '1'],
        md5_ok: true,
        deleted: 3,
        empty_receive: [],
        no_queues: [],
        missing_queue_error: 'AWS.SimpleQueueService.NonExistentQueue',
      });
      expect(out.received_attributes_md5, python.version).toEqual(out.sent_attributes_md5);
      // FIFO: SequenceNumber (the job id) on send and receive, the group's messages together and in
      // order in one receive (then nothing more), and the repeated body answered with the first message.
      const [s1, s2] = out.fifo_sequence_numbers;
      expect(out.fifo_duplicate, python.version).toEqual([s1, s1]);
      expect(out.fifo_received, python.version).toEqual([
        [
          ['fifo 1', 'g', s1],
          ['fifo 2', 'g', s2],
        ],
        [],
        [],
      ]);
      // ReceiveRequestAttemptId: sent again, the same messages and receipt handles; refused once deleted.
      expect(out.attempt_bodies, python.version).toEqual(['retry 1', 'retry 2']);
      expect(out.attempt_replayed, python.version).toBe(true);
      expect(out.attempt_after_delete, python.version).toBe('InvalidParameterValue');
      // CreateQueue: a .fifo name with FifoQueue=false, or FifoQueue=true without one, is refused.
      expect(out.fifo_name_errors, python.version).toEqual([
        'InvalidParameterValue',
        'InvalidParameterValue',
      ]);
      const completed = await native(`/v1/queues/boto3-queue-${n}/jobs?state=completed`);
      expect(completed.jobs, python.version).toHaveLength(3);
    }
    // Which protocols were exercised (the JSON one by a current boto3, the query one by Debian's).
    console.info(`boto3 runs: ${protocols.join(', ')}`);
  });
});
