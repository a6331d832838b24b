import {
  ChangeMessageVisibilityBatchCommand,
  ChangeMessageVisibilityCommand,
  CreateQueueCommand,
  DeleteMessageBatchCommand,
  DeleteMessageCommand,
  ReceiveMessageCommand,
  SendMessageCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serverSecret } from '../../src/db/server-secrets.js';
import { getJob } from '../../src/jobs/read.js';
import { RECEIPT_HANDLE_SECRET, ReceiptHandles } from '../../src/sqs/receipt-handle.js';
import { failure, sqsClient } from '../sqs/support.js';
import { useListeningApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { apiKeyEntry, bearer, sqsPairOf } from '../support/keys.js';

/**
 * A leaked lease, from either protocol, is worth nothing to another tenant. Tenant B holds tenant A's
 * receipt handle (and the id and lease token inside it) and tries every way a client can use it: on
 * its own queue's URL, on A's, rewritten to name its own queue, with any bit changed, in batches, and
 * as the native API's id and token. Nothing of A's is completed, extended, failed or shown, while A
 * and B run honest traffic beside it that sees no 5xx.
 */
const database = useTestDatabase();

const KEYS = [
  apiKeyEntry('root', ['admin']),
  apiKeyEntry('tenant-a', ['producer', 'consumer'], ['a.*']),
  apiKeyEntry('tenant-b', ['producer', 'consumer', 'admin'], ['b.*']),
];
const PAIRS = KEYS.map((k) => sqsPairOf(k.name));
const server = useListeningApp(database, {
  BATON_API_KEYS: JSON.stringify(KEYS),
  BATON_SQS_CREDENTIALS: JSON.stringify(PAIRS),
});

const clients: SQSClient[] = [];
function sqsAs(name: string): SQSClient {
  const pair = PAIRS.find((p) => p.api_key === name)!;
  const client = sqsClient(server.url, {
    credentials: { accessKeyId: pair.access_key_id, secretAccessKey: pair.secret_access_key },
    maxAttempts: 1,
  });
  clients.push(client);
  return client;
}
const queueUrl = (name: string) => `${server.url}/000000000000/${name}`;
const native = (who: string, method: string, path: string, body?: unknown) =>
  fetch(`${server.url}${path}`, {
    method,
    headers: {
      ...bearer(who),
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });

let a: SQSClient;
let b: SQSClient;
afterAll(() => {
  for (const client of clients) client.destroy();
});
beforeAll(async () => {
  a = sqsAs('tenant-a');
  b = sqsAs('tenant-b');
  const root = sqsAs('root');
  for (const name of ['a.jobs', 'b.jobs']) await root.send(new CreateQueueCommand({ QueueName: name }));
});

/** Honest work of one tenant on its own queue, over SQS, until `stop`; every failure is kept. */
async function honest(client: SQSClient, queue: string, stop: () => boolean, errors: unknown[]) {
  let done = 0;
  while (!stop()) {
    try {
      await client.send(new SendMessageCommand({ QueueUrl: queueUrl(queue), MessageBody: `honest ${done}` }));
      const got = await client.send(
        new ReceiveMessageCommand({ QueueUrl: queueUrl(queue), MaxNumberOfMessages: 10 }),
      );
      for (const m of got.Messages ?? []) {
        await client.send(
          new DeleteMessageCommand({ QueueUrl: queueUrl(queue), ReceiptHandle: m.ReceiptHandle! }),
        );
        done++;
      }
    } catch (err) {
      errors.push(err);
    }
  }
  return done;
}

describe('a leaked lease of another tenant', () => {
  it('acts on nothing by any protocol, however rewritten, beside honest traffic', async () => {
    // A's message, received: its handle, and the id and token inside it (as a leak would give them).
    await a.send(new SendMessageCommand({ QueueUrl: queueUrl('a.jobs'), MessageBody: 'tenant A' }));
    const [message] = (
      await a.send(new ReceiveMessageCommand({ QueueUrl: queueUrl('a.jobs'), VisibilityTimeout: 600 }))
    ).Messages!;
    const handle = message!.ReceiptHandle!;
    const lease = new ReceiptHandles(await serverSecret(database.db, RECEIPT_HANDLE_SECRET)).decode(handle)!;
    expect(lease).toMatchObject({ queue: 'a.jobs', id: message!.MessageId });
    const before = await getJob(database.db as never, lease.id);

    const errors: unknown[] = [];
    let stopped = false;
    const traffic = [honest(a, 'a.jobs', () => stopped, errors), honest(b, 'b.jobs', () => stopped, errors)];

    // The handle's bytes with the queue rewritten to B's (same length) and the tag kept; and every
    // single bit flipped.
    const bytes = Buffer.from(handle, 'base64url');
    const rewritten = Buffer.from(bytes);
    rewritten.write('b', 1 + 16 + 8, 'latin1');
    const forged = [handle, rewritten.toString('base64url')];
    for (let i = 0; i < bytes.length * 8; i += 7) {
      const flipped = Buffer.from(bytes);
      flipped[i >> 3]! ^= 1 << (i & 7);
      forged.push(flipped.toString('base64url'));
    }

    for (const receipt of forged) {
      // On B's own queue: the handle is not one of that queue (or not one this server issued).
      const del = await failure(
        b.send(new DeleteMessageCommand({ QueueUrl: queueUrl('b.jobs'), ReceiptHandle: receipt })),
      );
      expect(del.name, receipt).toBe('ReceiptHandleIsInvalid');
      const vis = await failure(
        b.send(
          new ChangeMessageVisibilityCommand({
            QueueUrl: queueUrl('b.jobs'),
            ReceiptHandle: receipt,
            VisibilityTimeout: 0,
          }),
        ),
      );
      expect(vis.name, receipt).toBe('ReceiptHandleIsInvalid');
      const batch = await b.send(
        new DeleteMessageBatchCommand({
          QueueUrl: queueUrl('b.jobs'),
          Entries: [{ Id: 'x', ReceiptHandle: receipt }],
        }),
      );
      expect(batch.Failed?.map((f) => f.Code)).toEqual(['ReceiptHandleIsInvalid']);
      const visBatch = await b.send(
        new ChangeMessageVisibilityBatchCommand({
          QueueUrl: queueUrl('b.jobs'),
          Entries: [{ Id: 'x', ReceiptHandle: receipt, VisibilityTimeout: 5 }],
        }),
      );
      expect(visBatch.Failed?.map((f) => f.Code)).toEqual(['ReceiptHandleIsInvalid']);
    }
    // On A's queue: B's key may not use it at all.
    const denied = await failure(
      b.send(new DeleteMessageCommand({ QueueUrl: queueUrl('a.jobs'), ReceiptHandle: handle })),
    );
    expect(denied.name).toBe('AccessDenied');

    // The native API with the id and token from the handle: the job does not exist, to B.
    const body = { lease_token: lease.leaseToken };
    for (const [method, path, payload] of [
      ['GET', `/v1/jobs/${lease.id}`, undefined],
      ['POST', `/v1/jobs/${lease.id}/ack`, body],
      ['POST', `/v1/jobs/${lease.id}/ack`, { ...body, next: { max_jobs: 1 } }],
      ['POST', `/v1/jobs/${lease.id}/renew`, { ...body, lease_ms: 3_600_000 }],
      ['POST', `/v1/jobs/${lease.id}/nack`, { ...body, dead: true }],
      ['POST', `/v1/jobs/${lease.id}/cancel`, undefined],
    ] as const) {
      const res = await native('tenant-b', method, path, payload);
      expect(res.status, `${method} ${path}`).toBe(404);
    }
    for (const [path, list] of [
      ['/v1/jobs/ack', 'acks'],
      ['/v1/jobs/renew', 'renewals'],
    ] as const) {
      const res = await native('tenant-b', 'POST', path, {
        [list]: [{ id: lease.id, lease_token: lease.leaseToken }],
      });
      expect(res.status).toBe(200);
      expect(((await res.json()) as { results: unknown }).results).toEqual([
        { id: lease.id, outcome: 'not_found' },
      ]);
    }
    // Ids rewritten: padded, signed, spaced are refused; a neighbour is someone else's or no one's.
    for (const id of [`0${lease.id}`, `+${lease.id}`, ` ${lease.id}`, `${lease.id}.0`]) {
      const res = await native('tenant-b', 'POST', `/v1/jobs/${encodeURIComponent(id)}/ack`, body);
      expect(res.status, id).toBe(400);
    }

    stopped = true;
    const counts = await Promise.all(traffic);
    expect(errors).toEqual([]);
    expect(counts.every((n) => n > 0)).toBe(true);

    // A's job was never touched: claimed under its lease, expiry as its receive set it.
    const after = await getJob(database.db as never, lease.id);
    expect(after).toMatchObject({ state: 'claimed', attempts: 1 });
    expect(after!.lease_expires_at).toEqual(before!.lease_expires_at);
    // And A completes it with its handle.
    await a.send(new DeleteMessageCommand({ QueueUrl: queueUrl('a.jobs'), ReceiptHandle: handle }));
    expect((await getJob(database.db as never, lease.id))?.state).toBe('completed');
  });
});
