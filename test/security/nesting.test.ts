import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  CreateQueueCommand,
  DeleteMessageCommand,
  ReceiveMessageCommand,
  SendMessageCommand,
} from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sqsClient } from '../sqs/support.js';
import { createTestApp, loadStartup, useListeningApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { api } from '../support/http.js';

/**
 * One nesting limit (128 levels of arrays and objects) and one size limit (BATON_BODY_LIMIT_BYTES)
 * for every document any protocol reads, checked while it is read: the native API's JSON body, the
 * SQS endpoint's JSON 1.0 body and query-protocol parameters, JSON inside SQS attributes, and the
 * schedules file. Each refuses a document over the limit in its own shape, naming what was too deep:
 * a request with a 4xx, never a 5xx (a QueueUrl nested 10,000 levels deep was once a 500: formatting
 * its error overflowed the stack), the file with a start-up error naming the file and where. Nesting
 * the limit allows still reaches each field's own check.
 */
const BODY_LIMIT = 1024 * 1024;
const database = useTestDatabase();
const server = useListeningApp(database, { BATON_BODY_LIMIT_BYTES: String(BODY_LIMIT) });
let sqs: ReturnType<typeof sqsClient>;
let queueUrl: string;
beforeAll(async () => {
  sqs = sqsClient(server.url, { maxAttempts: 1 });
  queueUrl = (await sqs.send(new CreateQueueCommand({ QueueName: 'nesting' }))).QueueUrl!;
});
afterAll(() => sqs?.destroy());

/** JSON text of `inner` inside `levels` arrays. */
const nested = (levels: number, inner = '1') => `${'['.repeat(levels)}${inner}${']'.repeat(levels)}`;

const LEVELS = [129, 1_000, 100_000];

async function post(path: string, headers: Record<string, string>, body: string) {
  const res = await fetch(`${server.url}${path}`, { method: 'POST', headers, body });
  return { status: res.status, headers: res.headers, text: await res.text() };
}

const native = (queue: string, body: string) =>
  post(`/v1/queues/${queue}/jobs`, { 'content-type': 'application/json' }, body);

async function sqsJson(action: string, body: string) {
  const res = await post(
    '/',
    { 'content-type': 'application/x-amz-json-1.0', 'x-amz-target': `AmazonSQS.${action}` },
    body,
  );
  return { ...res, json: JSON.parse(res.text) as { __type: string; message: string } };
}

const sqsQuery = (body: string) =>
  post('/', { 'content-type': 'application/x-www-form-urlencoded; charset=utf-8' }, body);

/** The query protocol's XML error: its code and message. */
function xmlError(text: string) {
  return {
    code: /<Code>([^<]*)<\/Code>/.exec(text)?.[1],
    message: /<Message>([^<]*)<\/Message>/.exec(text)?.[1],
  };
}

describe('the native API', () => {
  it.each(LEVELS)('a body nested %i levels deep is 400 naming body', async (levels) => {
    const res = await native('nest-native', `{"payload":${nested(levels)}}`);
    expect(res.status).toBe(400);
    expect(JSON.parse(res.text)).toMatchObject({
      code: 'validation_failed',
      errors: [{ field: 'body', message: 'must not nest arrays and objects deeper than 128 levels' }],
    });
  });

  it('a payload 100 levels deep passes the body’s limit and is refused by the payload’s, naming it', async () => {
    const res = await native('nest-native', `{"payload":${nested(100)}}`);
    expect(res.status).toBe(400);
    expect(JSON.parse(res.text).errors).toEqual([
      { field: 'payload', message: 'must not nest arrays and objects deeper than 64 levels' },
    ]);
    expect((await native('nest-native', `{"payload":${nested(63)}}`)).status).toBe(201);
  });
});

describe('the SQS JSON 1.0 protocol', () => {
  it.each(LEVELS)('a body nested %i levels deep is 400 SerializationException', async (levels) => {
    const res = await sqsJson('GetQueueUrl', `{"QueueName":${nested(levels)}}`);
    expect(res.status).toBe(400);
    expect(res.json).toEqual({
      __type: 'com.amazonaws.sqs#SerializationException',
      message: 'The request body must not nest arrays and objects deeper than 128 levels.',
    });
    expect(res.headers.get('x-amzn-query-error')).toBe('SerializationException;Sender');
  });

  it.each(LEVELS)('nesting %i levels deep inside a valid send is refused the same way', async (levels) => {
    for (const [name, value] of [
      ['MessageAttributes', `{"a":{"DataType":"String","StringValue":${nested(levels, '"x"')}}}`],
      ['MessageSystemAttributes', nested(levels)],
    ]) {
      const body = `{"QueueUrl":"${queueUrl}","MessageBody":"b","${name}":${value}}`;
      const res = await sqsJson('SendMessage', body);
      expect(res.status).toBe(400);
      expect(res.json.__type).toBe('com.amazonaws.sqs#SerializationException');
    }
    const batch = await sqsJson('SendMessageBatch', `{"QueueUrl":"${queueUrl}","Entries":${nested(levels)}}`);
    expect(batch.json.__type).toBe('com.amazonaws.sqs#SerializationException');
  });

  it('nesting the body’s limit allows reaches each field’s own check: 400 naming the field', async () => {
    const attribute = await sqsJson(
      'SendMessage',
      `{"QueueUrl":"${queueUrl}","MessageBody":"b","MessageAttributes":{"a":{"DataType":"String","StringValue":${nested(100, '"x"')}}}}`,
    );
    expect(attribute.status).toBe(400);
    expect(attribute.json.message).toMatch(/attribute 'a' must contain a non-empty value of type 'String'/);
    const map = await sqsJson(
      'SendMessage',
      `{"QueueUrl":"${queueUrl}","MessageBody":"b","MessageAttributes":${nested(100)}}`,
    );
    expect(map.json).toMatchObject({ __type: 'com.amazonaws.sqs#InvalidParameterValue' });
    expect(map.json.message).toMatch(/^Value \[{20}.*\.\.\. for parameter MessageAttributes is invalid/);
    const entries = await sqsJson(
      'SendMessageBatch',
      `{"QueueUrl":"${queueUrl}","Entries":[${nested(100)}]}`,
    );
    expect(entries.json.message).toBe('Entries.1 must be an object');
    const url = await sqsJson('GetQueueUrl', `{"QueueName":${nested(127)}}`);
    expect(url.json.message).toMatch(/for parameter QueueName is invalid/);
  });

  it('JSON inside an attribute (RedrivePolicy, Policy) has the same limit', async () => {
    const policy = (attributes: Record<string, string>) =>
      sqsJson('SetQueueAttributes', JSON.stringify({ QueueUrl: queueUrl, Attributes: attributes }));
    const tooDeep = await policy({ RedrivePolicy: `{"maxReceiveCount":${nested(10_000)}}` });
    expect(tooDeep.json.__type).toBe('com.amazonaws.sqs#InvalidParameterValue');
    expect(tooDeep.json.message).toMatch(
      /Redrive policy must not nest arrays and objects deeper than 128 levels/,
    );
    const deepCount = await policy({ RedrivePolicy: `{"maxReceiveCount":${nested(100)}}` });
    expect(deepCount.json.message).toMatch(/Invalid value for maxReceiveCount: \[\[\[/);
    const deepPolicy = await policy({ Policy: nested(200) });
    expect(deepPolicy.json).toEqual({
      __type: 'com.amazonaws.sqs#InvalidAttributeValue',
      message:
        'Invalid value for the parameter Policy: the document must not nest arrays and objects deeper than 128 levels.',
    });
  });
});

describe('the SQS query protocol', () => {
  it.each(LEVELS)(
    'a parameter nested %i levels deep is 400 InvalidParameterValue naming it',
    async (levels) => {
      const res = await sqsQuery(
        `Action=SendMessage&QueueUrl=${queueUrl}&MessageBody=b&${'a.'.repeat(levels - 1)}a=1`,
      );
      expect(res.status).toBe(400);
      expect(xmlError(res.text)).toEqual({
        code: 'InvalidParameterValue',
        message: `parameter ${'a.'.repeat(38)}a... must not nest deeper than 128 levels (parts between dots)`,
      });
    },
  );

  it('a parameter nested as deep as the limit allows reaches the action’s own check', async () => {
    const deepValue = `MessageAttribute.1.Value.${'X.'.repeat(100)}StringValue`;
    const res = await sqsQuery(
      `Action=SendMessage&QueueUrl=${queueUrl}&MessageBody=b&MessageAttribute.1.Name=a&${deepValue}=x`,
    );
    expect(res.status).toBe(400);
    expect(xmlError(res.text).message).toMatch(
      /attribute 'a' (must contain a non-empty attribute type|has an unknown field X)/,
    );
    const atLimit = await sqsQuery(`Action=GetQueueUrl&${'a.'.repeat(127)}a=1`);
    expect(xmlError(atLimit.text).code).toBe('MissingParameter');
  });
});

describe('both SQS protocols', () => {
  it('a body over BATON_BODY_LIMIT_BYTES is 400 InvalidParameterValue in the protocol’s shape', async () => {
    const big = 'x'.repeat(BODY_LIMIT + 1);
    const json = await sqsJson('SendMessage', JSON.stringify({ QueueUrl: queueUrl, MessageBody: big }));
    expect(json.status).toBe(400);
    expect(json.json.__type).toBe('com.amazonaws.sqs#InvalidParameterValue');
    expect(json.json.message).toMatch(/BATON_BODY_LIMIT_BYTES/);
    const query = await sqsQuery(`Action=SendMessage&QueueUrl=${queueUrl}&MessageBody=${big}`);
    expect(query.status).toBe(400);
    expect(xmlError(query.text).code).toBe('InvalidParameterValue');
  });
});

describe('honest traffic beside deep documents', () => {
  it('sees no 5xx while every protocol is sent bodies nested 100,000 levels deep', async () => {
    const hostile = async () => {
      const statuses: number[] = [];
      for (let i = 0; i < 20; i++) {
        statuses.push((await native('nest-honest', `{"payload":${nested(100_000)}}`)).status);
        statuses.push((await sqsJson('SendMessage', `{"QueueUrl":${nested(100_000)}}`)).status);
        statuses.push((await sqsQuery(`Action=SendMessage&${'a.'.repeat(100_000)}a=1`)).status);
      }
      return statuses;
    };
    const honestSqs = async () => {
      for (let i = 0; i < 20; i++) {
        await sqs.send(new SendMessageCommand({ QueueUrl: queueUrl, MessageBody: `honest ${i}` }));
        const { Messages = [] } = await sqs.send(
          new ReceiveMessageCommand({ QueueUrl: queueUrl, MaxNumberOfMessages: 10 }),
        );
        for (const m of Messages) {
          await sqs.send(new DeleteMessageCommand({ QueueUrl: queueUrl, ReceiptHandle: m.ReceiptHandle! }));
        }
      }
    };
    const honestNative = async () => {
      const statuses: number[] = [];
      for (let i = 0; i < 20; i++) {
        statuses.push((await api(server.app).enqueue('nest-honest', { payload: { i } })).status);
        const claimed = await api(server.app).claim('nest-honest');
        statuses.push(claimed.status);
        for (const job of claimed.body.jobs) {
          statuses.push((await api(server.app).ack(job.id, { lease_token: job.lease_token })).status);
        }
      }
      return statuses;
    };
    const [hostileStatuses, , nativeStatuses] = await Promise.all([hostile(), honestSqs(), honestNative()]);
    expect(new Set(hostileStatuses)).toEqual(new Set([400]));
    expect(nativeStatuses.every((s) => s < 300)).toBe(true);
  });
});

describe('the schedules file', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'baton-nesting-'));
  const write = (name: string, text: string) => {
    const file = path.join(dir, name);
    fs.writeFileSync(file, text);
    return file;
  };
  const schedule = (payload: string) =>
    `schedules:\n  x:\n    queue: nest-file\n    cron: "@daily"\n    payload: ${payload}\n`;
  /** The start-up error for this file, or undefined when it loads. */
  const startUpError = (file: string, env: Record<string, string> = {}) => {
    try {
      loadStartup({ BATON_SCHEDULES_FILE: file, ...env });
      return undefined;
    } catch (err) {
      return (err as Error).message;
    }
  };
  const TOO_DEEP = 'must not nest arrays and objects deeper than 128 levels';

  it.each(LEVELS)('nested %i levels deep stops start-up naming the file, line and column', (levels) => {
    const cases: [string, string, string][] = [
      // The payload's value starts at level 4 (the file, schedules, x, payload's list), so the 129th
      // level is its 126th bracket or dash.
      ['flow.yaml', schedule(nested(levels)), 'line 5, column 139'],
      ['block.yaml', schedule(`\n      ${'- '.repeat(levels)}x`), 'line 6, column 257'],
      [
        'file.json',
        `{"schedules": {"x": {"queue": "q", "cron": "@daily", "payload": ${nested(levels)}}}}`,
        'line 1, column 190',
      ],
    ];
    for (const [name, text, where] of cases) {
      const file = write(`${levels}-${name}`, text);
      expect(startUpError(file)).toContain(`BATON_SCHEDULES_FILE ${file}, ${where}: ${TOO_DEEP}`);
    }
  });

  it('nesting by indentation counts the same', () => {
    const lines = Array.from({ length: 130 }, (_, i) => `${' '.repeat(6 + i)}k:`).join('\n');
    const file = write('indented.yaml', schedule(`\n${lines} 1`));
    expect(startUpError(file)).toContain(`${file}, line 131, column 133: ${TOO_DEEP}`);
  });

  it('YAML aliases cannot nest deeper than the text shows, form a cycle, or expand without bound', () => {
    let chain = `a0: &a0 ${nested(100)}\n`;
    for (let i = 1; i < 4; i++) chain += `a${i}: &a${i} ${nested(100, `*a${i - 1}`)}\n`;
    const aliases = write('aliases.yaml', `${chain}${schedule('*a3')}`);
    expect(startUpError(aliases)).toContain(`${aliases}, at a1.0.0.0.0.0.0.0...: ${TOO_DEEP}`);
    const cycle = write(
      'cycle.yaml',
      'schedules:\n  x: &x\n    queue: q\n    cron: "@daily"\n    payload: [*x]\n',
    );
    expect(startUpError(cycle)).toContain(`${cycle}, at schedules.x.payload.0: ${TOO_DEEP}`);
    let laughs = 'l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n';
    for (let i = 1; i < 10; i++)
      laughs += `l${i}: &l${i} [${Array(9)
        .fill(`*l${i - 1}`)
        .join(', ')}]\n`;
    expect(startUpError(write('laughs.yaml', `${laughs}schedules: {}\n`))).toMatch(
      /BATON_SCHEDULES_FILE is not valid YAML: Excessive alias count/,
    );
  });

  it('a file over BATON_BODY_LIMIT_BYTES stops start-up before it is read', () => {
    const file = write('big.yaml', `${schedule('1')}${'#'.repeat(2048)}\n`);
    expect(startUpError(file, { BATON_BODY_LIMIT_BYTES: '1024' })).toContain(
      `BATON_SCHEDULES_FILE ${file} is ${fs.statSync(file).size} bytes; the limit is BATON_BODY_LIMIT_BYTES (1024)`,
    );
    expect(startUpError(file)).toBeUndefined();
  });

  it('a payload 100 levels deep is within the limit: the file is applied and the payload kept', async () => {
    const replica = await createTestApp(database, {
      BATON_SCHEDULES_FILE: write('deep-ok.yaml', schedule(nested(100))),
    });
    try {
      const res = await api(replica).call('GET', '/v1/schedules/x');
      expect(res.status).toBe(200);
      expect(JSON.stringify(res.body.payload)).toBe(nested(100));
    } finally {
      await replica.close();
    }
  });
});
