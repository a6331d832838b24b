import { describe, expect, it } from 'vitest';
import { md5Hex } from '../../src/sqs/md5.js';
import { parseQueryBody } from '../../src/sqs/query.js';
import { useListeningApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';

/**
 * The query protocol on the wire, as Debian 12's AWS CLI and boto3 (botocore 1.29) send it: these
 * run even where those packages are absent (test/sqs/cli.test.ts runs the real clients where they
 * are). Form-encoded parameters in, XML out, flattened lists and maps both ways.
 */
const database = useTestDatabase();
const server = useListeningApp(database);

async function post(params: Record<string, string>, path = '/') {
  const res = await fetch(`${server.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded; charset=utf-8' },
    body: new URLSearchParams({ Version: '2012-11-05', ...params }).toString(),
  });
  return { status: res.status, type: res.headers.get('content-type'), text: await res.text() };
}

/** The text of every <name> element, entities decoded (enough XML for these answers). */
function texts(xml: string, name: string): string[] {
  return [...xml.matchAll(new RegExp(`<${name}>([^<]*)</${name}>`, 'g'))].map((m) =>
    m[1]!.replace(/&#xD;/g, '\r').replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&amp;/g, '&'),
  );
}

describe('the query protocol', () => {
  it('creates a queue and answers in XML with the result and request id', async () => {
    const res = await post({
      Action: 'CreateQueue',
      QueueName: 'query-q',
      'Attribute.1.Name': 'VisibilityTimeout',
      'Attribute.1.Value': '40',
      'Tag.1.Key': 'team',
      'Tag.1.Value': 'blue',
    });
    expect(res.status).toBe(200);
    expect(res.type).toMatch(/^text\/xml/);
    expect(res.text).toMatch(
      /^<\?xml version="1\.0"\?><CreateQueueResponse xmlns="http:\/\/queue\.amazonaws\.com\/doc\/2012-11-05\/"><CreateQueueResult><QueueUrl>/,
    );
    expect(texts(res.text, 'QueueUrl')).toEqual([`${server.url}/000000000000/query-q`]);
    expect(texts(res.text, 'RequestId')).toHaveLength(1);
    const tags = await post({ Action: 'ListQueueTags', QueueUrl: `${server.url}/000000000000/query-q` });
    expect(tags.text).toContain('<Tag><Key>team</Key><Value>blue</Value></Tag>');
  });

  it('a body with CR, LF and markup arrives byte for byte; attributes come back as flattened XML', async () => {
    const queueUrl = `${server.url}/000000000000/query-q`;
    const body = 'line one\r\nline two & <three>';
    const sent = await post({
      Action: 'SendMessage',
      QueueUrl: queueUrl,
      MessageBody: body,
      'MessageAttribute.1.Name': 'colour',
      'MessageAttribute.1.Value.DataType': 'String',
      'MessageAttribute.1.Value.StringValue': 'blue',
      'MessageAttribute.2.Name': 'raw',
      'MessageAttribute.2.Value.DataType': 'Binary',
      'MessageAttribute.2.Value.BinaryValue': Buffer.from([1, 2, 3]).toString('base64'),
    });
    expect(texts(sent.text, 'MD5OfMessageBody')).toEqual([md5Hex(body)]);
    const got = await post({
      Action: 'ReceiveMessage',
      QueueUrl: queueUrl,
      'AttributeName.1': 'All',
      'MessageAttributeName.1': 'All',
      MaxNumberOfMessages: '10',
    });
    expect(texts(got.text, 'Body')).toEqual([body]);
    expect(texts(got.text, 'MD5OfBody')).toEqual([md5Hex(body)]);
    expect(texts(got.text, 'MD5OfMessageAttributes')).toEqual(texts(sent.text, 'MD5OfMessageAttributes'));
    expect(got.text).toContain(
      '<MessageAttribute><Name>colour</Name><Value><DataType>String</DataType><StringValue>blue</StringValue></Value></MessageAttribute>',
    );
    expect(got.text).toContain('<Attribute><Name>ApproximateReceiveCount</Name><Value>1</Value></Attribute>');
    const [handle] = texts(got.text, 'ReceiptHandle');
    const deleted = await post({
      Action: 'DeleteMessageBatch',
      QueueUrl: queueUrl,
      'DeleteMessageBatchRequestEntry.1.Id': 'one',
      'DeleteMessageBatchRequestEntry.1.ReceiptHandle': handle!,
      'DeleteMessageBatchRequestEntry.2.Id': 'two',
      'DeleteMessageBatchRequestEntry.2.ReceiptHandle': 'bogus',
    });
    expect(deleted.text).toContain(
      '<DeleteMessageBatchResultEntry><Id>one</Id></DeleteMessageBatchResultEntry>',
    );
    expect(deleted.text).toMatch(
      /<BatchResultErrorEntry><Id>two<\/Id><SenderFault>true<\/SenderFault><Code>ReceiptHandleIsInvalid<\/Code>/,
    );
    // Nothing to receive: the result element is still there (botocore's parser needs it).
    const empty = await post({ Action: 'ReceiveMessage', QueueUrl: queueUrl });
    expect(empty.text).toContain('<ReceiveMessageResult></ReceiveMessageResult><ResponseMetadata>');
    const none = await post({ Action: 'DeleteMessage', QueueUrl: queueUrl, ReceiptHandle: handle! });
    expect(none.text).toMatch(/^<\?xml version="1\.0"\?><DeleteMessageResponse [^>]+><ResponseMetadata>/);
  });

  it('errors are an XML ErrorResponse with Type, Code and Message', async () => {
    const res = await post({ Action: 'GetQueueUrl', QueueName: 'nope' });
    expect(res.status).toBe(400);
    expect(res.text).toMatch(
      /<ErrorResponse xmlns="[^"]+"><Error><Type>Sender<\/Type><Code>AWS\.SimpleQueueService\.NonExistentQueue<\/Code><Message>The specified queue does not exist\.<\/Message>/,
    );
    expect(texts((await post({})).text, 'Code')).toEqual(['InvalidAction']);
    expect(
      texts(
        (await post({ Action: 'SendMessage', QueueUrl: `${server.url}/000000000000/query-q` })).text,
        'Code',
      ),
    ).toEqual(['MissingParameter']);
  });

  it('a request posted to the queue URL itself needs no QueueUrl parameter', async () => {
    const res = await post(
      { Action: 'GetQueueAttributes', 'AttributeName.1': 'VisibilityTimeout' },
      '/000000000000/query-q',
    );
    expect(res.text).toContain('<Attribute><Name>VisibilityTimeout</Name><Value>40</Value></Attribute>');
  });

  it('a parameter given twice, or a malformed percent-escape, is refused naming it; nothing is sent', async () => {
    await post({ Action: 'CreateQueue', QueueName: 'query-strict' });
    const queueUrl = encodeURIComponent(`${server.url}/000000000000/query-strict`);
    const raw = async (body: string, path = '/') => {
      const res = await fetch(`${server.url}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded; charset=utf-8' },
        body,
      });
      return { status: res.status, text: await res.text() };
    };
    const send = `Action=SendMessage&Version=2012-11-05&QueueUrl=${queueUrl}`;
    for (const [body, parameter, path] of [
      // Last-wins would have sent "b", or sent to whichever queue came last.
      [`${send}&MessageBody=a&MessageBody=b`, 'MessageBody'],
      [`${send}&QueueUrl=${queueUrl}&MessageBody=a`, 'QueueUrl'],
      [`${send}&Action=DeleteQueue&MessageBody=a`, 'Action'],
      // Once in the URL and once in the body is twice too.
      [`${send}&MessageBody=a`, 'QueueUrl', `/?QueueUrl=${queueUrl}`],
      [`${send}&MessageBody=%zz`, 'MessageBody'],
      [`${send}&MessageBody=ab%4`, 'MessageBody'],
      [`${send}&MessageBody=%ff%fe`, 'MessageBody'],
      [`${send}&Message%zBody=a`, 'Message%zBody'],
    ] as const) {
      const res = await raw(body, path);
      expect(res.status, body).toBe(400);
      expect(texts(res.text, 'Code'), body).toEqual(['InvalidParameterValue']);
      expect(texts(res.text, 'Type')).toEqual(['Sender']);
      expect(texts(res.text, 'Message')[0], body).toContain(`for parameter ${parameter} is invalid`);
    }
    expect(texts((await raw(`${send}&MessageBody=%zz`)).text, 'Message')[0]).toContain(
      '%zz is a malformed percent-escape',
    );
    const attributes = await post({
      Action: 'GetQueueAttributes',
      QueueUrl: decodeURIComponent(queueUrl),
      'AttributeName.1': 'ApproximateNumberOfMessages',
    });
    expect(attributes.text).toContain('<Name>ApproximateNumberOfMessages</Name><Value>0</Value>');
    // Escapes as clients send them still decode: + is a space, %2B a plus, %C3%A9 an é.
    expect((await raw(`${send}&MessageBody=a+b%2B%C3%A9`)).status).toBe(200);
  });

  it('paths beside it keep their answers: GET on a queue URL is 405, an unknown two-part path 404', async () => {
    const get = await fetch(`${server.url}/000000000000/query-q`);
    expect(get.status).toBe(405);
    expect(get.headers.get('allow')).toBe('POST');
    expect((await fetch(`${server.url}/v1/nothing`)).status).toBe(404);
  });
});

describe('query parameters → the JSON shape', () => {
  it('numbered lists, Name/Value maps, nested entries and integers', () => {
    const { action, input } = parseQueryBody(
      new URLSearchParams({
        Action: 'SendMessageBatch',
        QueueUrl: 'u',
        'SendMessageBatchRequestEntry.2.Id': 'b',
        'SendMessageBatchRequestEntry.2.MessageBody': 'two',
        'SendMessageBatchRequestEntry.1.Id': 'a',
        'SendMessageBatchRequestEntry.1.MessageBody': 'one',
        'SendMessageBatchRequestEntry.1.DelaySeconds': '5',
        'SendMessageBatchRequestEntry.1.MessageAttribute.1.Name': 'k',
        'SendMessageBatchRequestEntry.1.MessageAttribute.1.Value.DataType': 'String',
        'SendMessageBatchRequestEntry.1.MessageAttribute.1.Value.StringValue': 'v',
      }).toString(),
    );
    expect(action).toBe('SendMessageBatch');
    expect(JSON.parse(JSON.stringify(input))).toEqual({
      QueueUrl: 'u',
      Entries: [
        {
          Id: 'a',
          MessageBody: 'one',
          DelaySeconds: 5,
          MessageAttributes: { k: { DataType: 'String', StringValue: 'v' } },
        },
        { Id: 'b', MessageBody: 'two' },
      ],
    });
    expect(parseQueryBody('Action=ReceiveMessage&AttributeNames=').input).toEqual({ AttributeNames: [] });
    expect(parseQueryBody('Action=X&A=a+b%2B%C3%A9&&B').input).toEqual({ A: 'a b+é', B: '' });
  });

  it('refuses what would reach a prototype, a value that is also a list, and absurd indexes', () => {
    expect(() => parseQueryBody('Action=X&__proto__.polluted=1')).toThrow(/not well formed/);
    expect(() => parseQueryBody('Action=X&A=1&A.1=2')).toThrow(/both as a value and as a list/);
    expect(() => parseQueryBody('Action=X&AttributeName.99999=All')).toThrow(/not well formed/);
    expect(() => parseQueryBody('Action=X&A=1&A=1')).toThrow(/A is given more than once/);
    expect(() => parseQueryBody('Action=X&A=%')).toThrow(/% is a malformed percent-escape/);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });
});
