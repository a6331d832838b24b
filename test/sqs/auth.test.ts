import { Writable } from 'node:stream';
import {
  ChangeMessageVisibilityCommand,
  CreateQueueCommand,
  DeleteMessageCommand,
  GetQueueUrlCommand,
  ListDeadLetterSourceQueuesCommand,
  ListQueuesCommand,
  ReceiveMessageCommand,
  SendMessageCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type BatonApp, buildApp } from '../../src/app.js';
import { sha256 } from '../../src/auth/api-keys.js';
import { createLogger } from '../../src/logger.js';
import { listen, testConfig } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { failure, sqsClient } from './support.js';

/**
 * With API keys configured, every SQS request must be signed (AWS Signature Version 4) with a key
 * pair from BATON_SQS_CREDENTIALS, and acts as the API key the pair names: its scopes decide the
 * actions, its queue patterns the queues, ListQueues included. Secrets never reach the log.
 */
const database = useTestDatabase();

const key = (name: string, scopes: string[], queues?: string[]) => ({
  name,
  sha256: sha256(`${name}-bearer-secret`).toString('hex'),
  scopes,
  ...(queues ? { queues } : {}),
});
const KEYS = [
  key('ops', ['admin']),
  key('web', ['producer']),
  key('worker', ['consumer']),
  key('team-a', ['producer', 'consumer'], ['a.*']),
  key('team-a-ops', ['admin'], ['a.*']),
];
const PAIRS = KEYS.map((k) => ({
  access_key_id: `AKIA${k.name.toUpperCase().replace(/-/g, '_')}`,
  secret_access_key: `${k.name}-secret-access-key-0123456789`,
  api_key: k.name,
}));
const SECRETS = PAIRS.map((p) => p.secret_access_key);

const lines: string[] = [];
let app: BatonApp;
let url: string;
const clients: SQSClient[] = [];

/** A client signing with the pair of one API key (or with the given credentials). */
function as(name: string, config: Parameters<typeof sqsClient>[1] = {}): SQSClient {
  const pair = PAIRS.find((p) => p.api_key === name)!;
  const client = sqsClient(url, {
    credentials: { accessKeyId: pair.access_key_id, secretAccessKey: pair.secret_access_key },
    maxAttempts: 1,
    ...config,
  });
  clients.push(client);
  return client;
}

const queueUrl = (name: string) => `${url}/000000000000/${name}`;

beforeAll(async () => {
  const config = testConfig({
    BATON_API_KEYS: JSON.stringify(KEYS),
    BATON_SQS_CREDENTIALS: JSON.stringify(PAIRS),
    LOG_LEVEL: 'debug',
    LOG_FORMAT: 'json',
  });
  const stream = new Writable({
    write(chunk, _encoding, done) {
      lines.push(String(chunk));
      done();
    },
  });
  app = await buildApp({ config, databaseUrl: database.url, logger: createLogger(config, stream) });
  await app.ready();
  url = await listen(app);
  for (const name of ['a.one', 'b.two', 'a.dlq-source', 'b.dlq-source', 'shared-dlq']) {
    await as('ops').send(new CreateQueueCommand({ QueueName: name }));
  }
});
afterAll(async () => {
  for (const client of clients) client.destroy();
  await app?.close();
});

describe('SQS authentication', () => {
  it('a request signed with a configured pair is accepted', async () => {
    const out = await as('web').send(
      new SendMessageCommand({ QueueUrl: queueUrl('a.one'), MessageBody: 'signed' }),
    );
    expect(out.MessageId).toMatch(/^\d+$/);
  });

  it('a wrong secret: SignatureDoesNotMatch (403)', async () => {
    const client = as('web', {
      credentials: { accessKeyId: 'AKIAWEB', secretAccessKey: 'not-the-secret-at-all' },
    });
    const err = await failure(client.send(new ListQueuesCommand({})));
    expect(err).toMatchObject({ name: 'SignatureDoesNotMatch', $metadata: { httpStatusCode: 403 } });
  });

  it('an unknown access key: InvalidClientTokenId (403)', async () => {
    const client = as('web', {
      credentials: { accessKeyId: 'AKIANOBODY', secretAccessKey: 'whatever-secret-value' },
    });
    expect((await failure(client.send(new ListQueuesCommand({})))).name).toBe('InvalidClientTokenId');
  });

  it('an unsigned request: MissingAuthenticationToken (403)', async () => {
    const res = await fetch(`${url}/`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-amz-json-1.0', 'x-amz-target': 'AmazonSQS.ListQueues' },
      body: '{}',
    });
    expect(res.status).toBe(403);
    expect(res.headers.get('x-amzn-query-error')).toBe('MissingAuthenticationToken;Sender');
    // Nor does the native API's Bearer key open the SQS endpoint.
    const bearer = await fetch(`${url}/`, {
      method: 'POST',
      headers: {
        'content-type': 'application/x-amz-json-1.0',
        'x-amz-target': 'AmazonSQS.ListQueues',
        authorization: 'Bearer ops-bearer-secret',
      },
      body: '{}',
    });
    expect(bearer.status).toBe(400);
    expect(bearer.headers.get('x-amzn-query-error')).toBe('IncompleteSignature;Sender');
  });

  it('a clock 20 minutes off: RequestExpired; 10 minutes off is within the 15 AWS allows', async () => {
    for (const minutes of [-20, 20]) {
      const err = await failure(
        as('web', { systemClockOffset: minutes * 60_000 }).send(new ListQueuesCommand({})),
      );
      expect(err.name, `${minutes} min`).toBe('RequestExpired');
    }
    await as('web', { systemClockOffset: -10 * 60_000 }).send(new ListQueuesCommand({}));
  });

  it('the signature covers the body and the action: changing either after signing is refused', async () => {
    type Request = { body: string | Uint8Array; headers: Record<string, string> };
    const tamper = (change: (request: Request) => void) => {
      const client = as('web');
      client.middlewareStack.addRelativeTo(
        ((next: (args: unknown) => Promise<unknown>) => async (args: { request: Request }) => {
          change(args.request);
          return next(args);
        }) as never,
        { relation: 'after', toMiddleware: 'httpSigningMiddleware', name: 'tamper' },
      );
      return client;
    };
    const body = tamper((r) => {
      // The SDK's body is a Uint8Array (with string methods that warn when used): read its bytes.
      const bytes = r.body as Uint8Array;
      const text = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8');
      r.body = text.replace('original', 'changed!');
    });
    const err = await failure(
      body.send(new SendMessageCommand({ QueueUrl: queueUrl('a.one'), MessageBody: 'original' })),
    );
    expect(err.name).toBe('SignatureDoesNotMatch');
    const action = tamper((r) => {
      r.headers['x-amz-target'] = 'AmazonSQS.DeleteQueue';
    });
    expect((await failure(action.send(new GetQueueUrlCommand({ QueueName: 'a.one' })))).name).toBe(
      'SignatureDoesNotMatch',
    );
  });
});

describe('SQS scopes and queue patterns', () => {
  it('producer sends; consumer receives, changes visibility and deletes; neither does the other’s work', async () => {
    await as('web').send(new SendMessageCommand({ QueueUrl: queueUrl('b.two'), MessageBody: 'work' }));
    expect(
      (await failure(as('web').send(new ReceiveMessageCommand({ QueueUrl: queueUrl('b.two') })))).name,
    ).toBe('AccessDenied');
    expect(
      (
        await failure(
          as('worker').send(new SendMessageCommand({ QueueUrl: queueUrl('b.two'), MessageBody: 'no' })),
        )
      ).name,
    ).toBe('AccessDenied');
    const [m] = (await as('worker').send(new ReceiveMessageCommand({ QueueUrl: queueUrl('b.two') })))
      .Messages!;
    await as('worker').send(
      new ChangeMessageVisibilityCommand({
        QueueUrl: queueUrl('b.two'),
        ReceiptHandle: m!.ReceiptHandle!,
        VisibilityTimeout: 60,
      }),
    );
    await as('worker').send(
      new DeleteMessageCommand({ QueueUrl: queueUrl('b.two'), ReceiptHandle: m!.ReceiptHandle! }),
    );
    // Either may look a queue up; only admin creates.
    expect((await as('web').send(new GetQueueUrlCommand({ QueueName: 'b.two' }))).QueueUrl).toBe(
      queueUrl('b.two'),
    );
    const err = await failure(as('worker').send(new CreateQueueCommand({ QueueName: 'b.new' })));
    expect(err).toMatchObject({ name: 'AccessDenied', $metadata: { httpStatusCode: 403 } });
  });

  it('a key limited to a.* sees and touches only a.* queues, ListQueues included', async () => {
    const team = as('team-a');
    const listed = await team.send(new ListQueuesCommand({}));
    expect(listed.QueueUrls).toEqual([queueUrl('a.dlq-source'), queueUrl('a.one')]);
    const all = await as('ops').send(new ListQueuesCommand({}));
    expect(all.QueueUrls).toHaveLength(5);
    expect((await failure(team.send(new GetQueueUrlCommand({ QueueName: 'b.two' })))).name).toBe(
      'AccessDenied',
    );
    expect(
      (await failure(team.send(new SendMessageCommand({ QueueUrl: queueUrl('b.two'), MessageBody: 'x' }))))
        .name,
    ).toBe('AccessDenied');
    // A handle received from a.one does not work on another queue's URL, nor the other way round.
    await team.send(new SendMessageCommand({ QueueUrl: queueUrl('a.one'), MessageBody: 'mine' }));
    const [m] = (
      await team.send(new ReceiveMessageCommand({ QueueUrl: queueUrl('a.one'), MaxNumberOfMessages: 1 }))
    ).Messages!;
    const other = await failure(
      as('ops').send(
        new DeleteMessageCommand({ QueueUrl: queueUrl('b.two'), ReceiptHandle: m!.ReceiptHandle! }),
      ),
    );
    expect(other.name).toBe('ReceiptHandleIsInvalid');
  });

  it('a limited admin cannot create outside its patterns, nor point a dead-letter queue outside them', async () => {
    const teamOps = as('team-a-ops');
    expect((await failure(teamOps.send(new CreateQueueCommand({ QueueName: 'b.mine' })))).name).toBe(
      'AccessDenied',
    );
    const redrive = JSON.stringify({
      deadLetterTargetArn: 'arn:aws:sqs:us-east-1:000000000000:shared-dlq',
      maxReceiveCount: 2,
    });
    const err = await failure(
      teamOps.send(new CreateQueueCommand({ QueueName: 'a.src', Attributes: { RedrivePolicy: redrive } })),
    );
    expect(err.name).toBe('AccessDenied');
    // ops may; then a.* sees only its own sources of the shared dead-letter queue.
    for (const source of ['a.dlq-source', 'b.dlq-source']) {
      await as('ops').send(
        new CreateQueueCommand({ QueueName: `${source}-2`, Attributes: { RedrivePolicy: redrive } }),
      );
    }
    const sources = await as('ops').send(
      new ListDeadLetterSourceQueuesCommand({ QueueUrl: queueUrl('shared-dlq') }),
    );
    expect(sources.queueUrls).toEqual([queueUrl('a.dlq-source-2'), queueUrl('b.dlq-source-2')]);
    const denied = await failure(
      as('team-a').send(new ListDeadLetterSourceQueuesCommand({ QueueUrl: queueUrl('shared-dlq') })),
    );
    expect(denied.name).toBe('AccessDenied');
  });

  it('no secret access key, signature or receipt handle is ever logged', async () => {
    await as('ops').send(new CreateQueueCommand({ QueueName: 'logged' }));
    await as('ops').send(new SendMessageCommand({ QueueUrl: queueUrl('logged'), MessageBody: 'log me not' }));
    const [m] = (await as('ops').send(new ReceiveMessageCommand({ QueueUrl: queueUrl('logged') }))).Messages!;
    await as('ops').send(
      new DeleteMessageCommand({ QueueUrl: queueUrl('logged'), ReceiptHandle: m!.ReceiptHandle! }),
    );
    const text = lines.join('');
    expect(text).toContain('"msg":"request completed"');
    for (const secret of SECRETS) expect(text).not.toContain(secret);
    expect(text).not.toMatch(/Signature=[0-9a-f]{64}/);
    expect(text).not.toContain(m!.ReceiptHandle!);
  });
});
