import { createHash } from 'node:crypto';
import {
  ChangeMessageVisibilityCommand,
  CreateQueueCommand,
  DeleteMessageCommand,
  DeleteQueueCommand,
  GetQueueAttributesCommand,
  type Message,
  PurgeQueueCommand,
  ReceiveMessageCommand,
  SendMessageBatchCommand,
  SendMessageCommand,
  SetQueueAttributesCommand,
} from '@aws-sdk/client-sqs';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rearmExpiredLeases } from '../../src/maintenance/rearm.js';
import { useListeningApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { api } from '../support/http.js';
import { failure, sqsClient } from './support.js';

/**
 * FIFO queues through @aws-sdk/client-sqs (unmodified) against real servers: one message of a group
 * in flight at a time, each group received in the order it was sent (across two replicas and several
 * receivers, and after redelivery), deduplication for five minutes, content-based deduplication,
 * FIFO dead-letter queues, and the rule that keeps a FIFO queue FIFO on Baton's own API. The leader
 * runs only when a test runs its duties (runOnce), so each step is seen.
 */
const database = useTestDatabase();
const server = useListeningApp(database, { BATON_MAINTENANCE: 'true', BATON_TICK_MS: '600000' });
// A second replica on the same database: limits and order hold across replicas.
const replica = useListeningApp(database);
let sqs: ReturnType<typeof sqsClient>;
let sqs2: ReturnType<typeof sqsClient>;
beforeAll(() => {
  sqs = sqsClient(server.url);
  sqs2 = sqsClient(replica.url);
});
afterAll(() => {
  sqs?.destroy();
  sqs2?.destroy();
});

async function createFifo(name: string, attributes: Record<string, string> = {}): Promise<string> {
  const out = await sqs.send(
    new CreateQueueCommand({ QueueName: name, Attributes: { FifoQueue: 'true', ...attributes } }),
  );
  return out.QueueUrl!;
}

async function send(url: string, body: string, group: string, dedup?: string) {
  return sqs.send(
    new SendMessageCommand({
      QueueUrl: url,
      MessageBody: body,
      MessageGroupId: group,
      ...(dedup === undefined ? {} : { MessageDeduplicationId: dedup }),
    }),
  );
}

async function receive(url: string, max = 10): Promise<Message[]> {
  const out = await sqs.send(
    new ReceiveMessageCommand({
      QueueUrl: url,
      MaxNumberOfMessages: max,
      MessageSystemAttributeNames: ['All'],
    }),
  );
  return out.Messages ?? [];
}

const bodies = (messages: Message[]) => messages.map((m) => m.Body);

async function remove(url: string, message: Message) {
  await sqs.send(new DeleteMessageCommand({ QueueUrl: url, ReceiptHandle: message.ReceiptHandle! }));
}

async function release(url: string, message: Message) {
  await sqs.send(
    new ChangeMessageVisibilityCommand({
      QueueUrl: url,
      ReceiptHandle: message.ReceiptHandle!,
      VisibilityTimeout: 0,
    }),
  );
}

/** What the leader does when a visibility timeout runs out: the lease ends, the message is re-armed. */
async function timeOut(message: Message) {
  await sql`UPDATE baton.jobs SET lease_expires_at = now() - interval '1 second'
            WHERE id = ${message.MessageId!} AND state = 'claimed'`.execute(database.db);
  await rearmExpiredLeases(database.db, 100);
}

describe('FIFO queues', () => {
  it('are created with their attributes, returned by GetQueueAttributes, and serve one message per group', async () => {
    const url = await createFifo('fifo-basics.fifo', { ContentBasedDeduplication: 'True' });
    expect(url).toBe(`${server.url}/000000000000/fifo-basics.fifo`);
    const { Attributes } = await sqs.send(
      new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ['All'] }),
    );
    expect(Attributes).toMatchObject({
      FifoQueue: 'true',
      ContentBasedDeduplication: 'true',
      DeduplicationScope: 'queue',
      FifoThroughputLimit: 'perQueue',
      QueueArn: 'arn:aws:sqs:us-east-1:000000000000:fifo-basics.fifo',
    });
    // Creating it again is idempotent with the same attributes, QueueNameExists with others.
    expect(await createFifo('fifo-basics.fifo', { ContentBasedDeduplication: 'true' })).toBe(url);
    const clash = await failure(createFifo('fifo-basics.fifo', { ContentBasedDeduplication: 'false' }));
    expect(clash.name).toBe('QueueNameExists');
    // Through Baton's own API: a queue whose groups may each have one job claimed at once.
    const native = await api(server.app).call('GET', '/v1/queues/fifo-basics.fifo');
    expect(native.body).toMatchObject({ group_concurrency_limit: 1, grouped: true });
    // The deduplication settings may change; FifoThroughputLimit is kept and returned.
    await sqs.send(
      new SetQueueAttributesCommand({
        QueueUrl: url,
        Attributes: { DeduplicationScope: 'messageGroup', FifoThroughputLimit: 'perMessageGroupId' },
      }),
    );
    const after = await sqs.send(
      new GetQueueAttributesCommand({
        QueueUrl: url,
        AttributeNames: ['DeduplicationScope', 'FifoThroughputLimit', 'FifoQueue'],
      }),
    );
    expect(after.Attributes).toEqual({
      FifoQueue: 'true',
      DeduplicationScope: 'messageGroup',
      FifoThroughputLimit: 'perMessageGroupId',
    });

    const a1 = await send(url, 'a1', 'a');
    expect(a1.SequenceNumber).toBe(a1.MessageId);
    await send(url, 'a2', 'a');
    await send(url, 'b1', 'b');
    // A group with nothing in flight gives its next messages together, in order, as SQS does.
    const first = await receive(url);
    expect(bodies(first)).toEqual(['a1', 'a2', 'b1']);
    const a = first.find((m) => m.Body === 'a1')!;
    expect(a.Attributes).toMatchObject({
      MessageGroupId: 'a',
      SequenceNumber: a1.MessageId,
      MessageDeduplicationId: createHash('sha256').update('a1').digest('hex'),
      ApproximateReceiveCount: '1',
    });
    // a3 waits for a1 and a2: nothing more of the group while either is in flight.
    await send(url, 'a3', 'a');
    expect(await receive(url)).toEqual([]);
    await remove(url, a);
    expect(await receive(url)).toEqual([]);
    await remove(url, first.find((m) => m.Body === 'a2')!);
    expect(bodies(await receive(url))).toEqual(['a3']);
  });

  it('keeps each group in order across two replicas and six concurrent receivers, never a group in two receives at once', async () => {
    const name = 'fifo-order.fifo';
    const url = await createFifo(name);
    const GROUPS = 8;
    const PER_GROUP = 20;
    // Sent interleaved (round after round over the groups) in batches of 10, with deduplication ids
    // that sort against the send order: the order of each group is the send order, nothing else.
    const sent: Record<string, string[]> = {};
    const entries: { group: string; body: string }[] = [];
    for (let i = 0; i < PER_GROUP; i++) {
      for (let g = 0; g < GROUPS; g++) {
        const group = `tenant/${g}`;
        const body = `${group}#${i}`;
        sent[group] = [...(sent[group] ?? []), body];
        entries.push({ group, body });
      }
    }
    const sequence: Record<string, bigint[]> = {};
    for (let start = 0; start < entries.length; start += 10) {
      const batch = entries.slice(start, start + 10);
      const out = await sqs.send(
        new SendMessageBatchCommand({
          QueueUrl: url,
          Entries: batch.map((e, i) => ({
            Id: `e${i}`,
            MessageBody: e.body,
            MessageGroupId: e.group,
            MessageDeduplicationId: `dedup-${10_000 - start - i}`,
          })),
        }),
      );
      expect(out.Failed ?? []).toEqual([]);
      for (const [i, ok] of out.Successful!.entries()) {
        expect(ok.Id).toBe(`e${i}`);
        expect(ok.SequenceNumber).toBe(ok.MessageId);
        const group = batch[i]!.group;
        sequence[group] = [...(sequence[group] ?? []), BigInt(ok.SequenceNumber!)];
      }
    }
    // Sequence numbers grow within each group.
    for (const numbers of Object.values(sequence)) {
      expect(numbers).toEqual([...numbers].sort((x, y) => (x < y ? -1 : 1)));
    }

    // The database's own view, sampled all along: a group's claimed jobs always come before its ready
    // ones (never a later message out while an earlier one waits), and groups go out several at once.
    let sampling = true;
    let worstInFlight = 0;
    let outOfOrder = 0;
    const sampler = (async () => {
      while (sampling) {
        const { rows } = await sql<{ n: number; bad: number }>`
          SELECT coalesce(max(c.n), 0)::int AS n, count(*) FILTER (WHERE c.last_claimed > c.first_ready)::int AS bad
          FROM (SELECT group_key, count(*) FILTER (WHERE state = 'claimed') AS n,
                       max(id) FILTER (WHERE state = 'claimed') AS last_claimed,
                       min(id) FILTER (WHERE state = 'ready') AS first_ready
                FROM baton.jobs WHERE queue = ${name} GROUP BY group_key) c`.execute(database.db);
        worstInFlight = Math.max(worstInFlight, rows[0]!.n);
        outOfOrder += rows[0]!.bad;
        await new Promise((r) => setTimeout(r, 5));
      }
    })();

    // The receivers' own view: a group is in flight from its receive until its last delete is sent.
    const inFlight = new Set<string>();
    const overlaps: string[] = [];
    const received: Record<string, string[]> = {};
    let total = 0;
    const receiver = async (client: typeof sqs) => {
      let idle = 0;
      while (total < GROUPS * PER_GROUP && idle < 20) {
        const out = await client.send(
          new ReceiveMessageCommand({
            QueueUrl: url,
            MaxNumberOfMessages: 10,
            WaitTimeSeconds: 1,
            MessageSystemAttributeNames: ['MessageGroupId', 'SequenceNumber'],
          }),
        );
        const messages = out.Messages ?? [];
        idle = messages.length === 0 ? idle + 1 : 0;
        // A receive's messages of one group come together, in order: each group is worked through in turn.
        const byGroup = new Map<string, Message[]>();
        for (const m of messages) {
          const group = m.Attributes!.MessageGroupId!;
          byGroup.set(group, [...(byGroup.get(group) ?? []), m]);
        }
        for (const group of byGroup.keys()) {
          if (inFlight.has(group)) overlaps.push(group);
          inFlight.add(group);
        }
        await Promise.all(
          [...byGroup].map(async ([group, list]) => {
            for (const m of list) {
              received[group] = [...(received[group] ?? []), m.Body!];
              await new Promise((r) => setTimeout(r, Math.random() * 15));
              if (m === list.at(-1)) inFlight.delete(group);
              await client.send(new DeleteMessageCommand({ QueueUrl: url, ReceiptHandle: m.ReceiptHandle! }));
              total++;
            }
          }),
        );
      }
    };
    await Promise.all([sqs, sqs, sqs, sqs2, sqs2, sqs2].map(receiver));
    sampling = false;
    await sampler;

    expect(total).toBe(GROUPS * PER_GROUP);
    expect(received).toEqual(sent);
    expect(overlaps).toEqual([]);
    expect(outOfOrder).toBe(0);
    expect(worstInFlight).toBeGreaterThan(1);
  }, 120_000);

  it('a redelivered message keeps its place: after its visibility timeout and after ChangeMessageVisibility 0', async () => {
    const url = await createFifo('fifo-redeliver.fifo', { ContentBasedDeduplication: 'true' });
    for (const body of ['m1', 'm2', 'm3']) await send(url, body, 'g');
    const [m1] = await receive(url, 1);
    expect(m1!.Body).toBe('m1');
    expect(await receive(url)).toEqual([]);

    // The visibility timeout runs out (the leader re-arms the lease, keeping the message's place).
    await timeOut(m1!);
    const [again] = await receive(url, 1);
    expect([again!.Body, again!.Attributes!.ApproximateReceiveCount]).toEqual(['m1', '2']);

    // Made visible at once by its receiver: still before m2 (a plain nack would put it behind m2).
    await release(url, again!);
    const [third] = await receive(url, 1);
    expect([third!.Body, third!.Attributes!.ApproximateReceiveCount]).toEqual(['m1', '3']);
    expect(third!.Attributes!.SequenceNumber).toBe(m1!.MessageId);

    await remove(url, third!);
    expect(bodies(await receive(url))).toEqual(['m2', 'm3']);
  });

  it('deduplicates for five minutes: the same id answers the original MessageId and SequenceNumber', async () => {
    const url = await createFifo('fifo-dedup.fifo');
    const first = await send(url, 'first', 'g1', 'order-17');
    const repeat = await send(url, 'first, sent again', 'g1', 'order-17');
    expect([repeat.MessageId, repeat.SequenceNumber]).toEqual([first.MessageId, first.SequenceNumber]);
    // The scope is the queue: the same id in another group is the same message.
    expect((await send(url, 'other group', 'g2', 'order-17')).MessageId).toBe(first.MessageId);
    // Within one batch too, and the batch's own repeats.
    const batch = await sqs.send(
      new SendMessageBatchCommand({
        QueueUrl: url,
        Entries: [
          { Id: 'a', MessageBody: 'x', MessageGroupId: 'g1', MessageDeduplicationId: 'order-17' },
          { Id: 'b', MessageBody: 'y', MessageGroupId: 'g1', MessageDeduplicationId: 'order-18' },
          { Id: 'c', MessageBody: 'z', MessageGroupId: 'g1', MessageDeduplicationId: 'order-18' },
        ],
      }),
    );
    const [a, b, c] = batch.Successful!;
    expect(a!.MessageId).toBe(first.MessageId);
    expect(c!.MessageId).toBe(b!.MessageId);
    expect(b!.SequenceNumber).toBe(b!.MessageId);

    // Received once each, and a duplicate sent after the delete is still not delivered again.
    const [m] = await receive(url, 1);
    expect([m!.Body, m!.Attributes!.MessageDeduplicationId]).toEqual(['first', 'order-17']);
    await remove(url, m!);
    expect((await send(url, 'after delete', 'g1', 'order-17')).MessageId).toBe(first.MessageId);
    const [n] = await receive(url);
    expect(n!.Body).toBe('y');
    await remove(url, n!);
    expect(await receive(url)).toEqual([]);

    // The window is five minutes (kept as the jobs' idempotency keys), then the id is new again.
    const { rows } = await sql<{ seconds: number }>`
      SELECT extract(epoch FROM expires_at - now())::float8 AS seconds FROM baton.idempotency_keys
      WHERE queue = 'fifo-dedup.fifo' AND key = 'order-17'`.execute(database.db);
    expect(rows[0]!.seconds).toBeGreaterThan(280);
    expect(rows[0]!.seconds).toBeLessThanOrEqual(300);
    await sql`UPDATE baton.idempotency_keys SET expires_at = now() - interval '1 second'
              WHERE queue = 'fifo-dedup.fifo'`.execute(database.db);
    const later = await send(url, 'six minutes later', 'g1', 'order-17');
    expect(later.MessageId).not.toBe(first.MessageId);
    expect(BigInt(later.SequenceNumber!)).toBeGreaterThan(BigInt(first.SequenceNumber!));
  });

  it('DeduplicationScope=messageGroup: the same id in another group is another message', async () => {
    const url = await createFifo('fifo-scope.fifo', { DeduplicationScope: 'messageGroup' });
    const g1 = await send(url, 'one', 'g1', 'same');
    const g2 = await send(url, 'two', 'g2', 'same');
    expect(g2.MessageId).not.toBe(g1.MessageId);
    expect((await send(url, 'one again', 'g1', 'same')).MessageId).toBe(g1.MessageId);
    expect(bodies(await receive(url)).sort()).toEqual(['one', 'two']);
  });

  it('ContentBasedDeduplication: the SHA-256 of the body is the deduplication id', async () => {
    const url = await createFifo('fifo-content.fifo', { ContentBasedDeduplication: 'true' });
    const x = await send(url, 'same body', 'g1');
    expect((await send(url, 'same body', 'g2')).MessageId).toBe(x.MessageId);
    // An explicit id still wins over the body's.
    const explicit = await send(url, 'same body', 'g1', 'explicit');
    expect(explicit.MessageId).not.toBe(x.MessageId);
    const y = await send(url, 'another body', 'g3');
    expect(y.MessageId).not.toBe(x.MessageId);
    const got = await receive(url);
    expect(bodies(got)).toEqual(['same body', 'same body', 'another body']);
    expect(got.map((m) => m.MessageId)).toEqual([x.MessageId, explicit.MessageId, y.MessageId]);
    const hashed = got.find((m) => m.MessageId === x.MessageId)!;
    expect(hashed.Attributes!.MessageDeduplicationId).toBe(
      createHash('sha256').update('same body', 'utf8').digest('hex'),
    );
  });

  it('PurgeQueue and DeleteQueue end the deduplication window', async () => {
    const url = await createFifo('fifo-purge.fifo');
    const first = await send(url, 'one', 'g', 'd1');
    await sqs.send(new PurgeQueueCommand({ QueueUrl: url }));
    const afterPurge = await send(url, 'one again', 'g', 'd1');
    expect(afterPurge.MessageId).not.toBe(first.MessageId);
    expect(bodies(await receive(url))).toEqual(['one again']);

    await sqs.send(new DeleteQueueCommand({ QueueUrl: url }));
    await createFifo('fifo-purge.fifo');
    const afterDelete = await send(url, 'in the new queue', 'g', 'd1');
    expect(afterDelete.MessageId).not.toBe(afterPurge.MessageId);
    expect(bodies(await receive(url))).toEqual(['in the new queue']);
  });

  it('a poison message moves to the FIFO dead-letter queue and unblocks its group; the dead-letter queue keeps the group', async () => {
    const dlq = await createFifo('fifo-dlq.fifo');
    const source = await createFifo('fifo-poison.fifo', {
      ContentBasedDeduplication: 'true',
      RedrivePolicy: JSON.stringify({
        deadLetterTargetArn: 'arn:aws:sqs:us-east-1:000000000000:fifo-dlq.fifo',
        maxReceiveCount: 2,
      }),
    });
    const p1 = await send(source, 'poison 1', 'g');
    const p2 = await send(source, 'poison 2', 'g');
    await send(source, 'fine', 'g');
    await send(source, 'other group', 'h');

    // One message at a time here, so each receive of the group is seen.
    const first = [...(await receive(source, 1)), ...(await receive(source, 1))];
    expect(bodies(first)).toEqual(['poison 1', 'other group']);
    await remove(source, first.find((m) => m.Body === 'other group')!);
    // poison 1 fails twice (maxReceiveCount 2), coming back first each time, then it is dead...
    await release(source, first.find((m) => m.Body === 'poison 1')!);
    const [retry] = await receive(source, 1);
    expect([retry!.Body, retry!.Attributes!.ApproximateReceiveCount]).toEqual(['poison 1', '2']);
    await release(source, retry!);
    // ...and its group goes on at once with the next message, which fails too (once by timing out).
    const [second] = await receive(source, 1);
    expect(second!.Body).toBe('poison 2');
    await timeOut(second!);
    const [secondRetry] = await receive(source, 1);
    expect(secondRetry!.Body).toBe('poison 2');
    await release(source, secondRetry!);
    const [fine] = await receive(source, 1);
    expect(fine!.Body).toBe('fine');
    await remove(source, fine!);

    // The leader moves both dead messages to the dead-letter queue: same ids, same group, in order.
    await server.app.maintainer!.runOnce();
    expect((await api(server.app).get(p1.MessageId!)).body).toMatchObject({
      queue: 'fifo-dlq.fifo',
      state: 'ready',
      group: 'g',
    });
    const [d1, d2, ...more] = await receive(dlq);
    expect(more).toEqual([]);
    expect([d1!.MessageId, d1!.Body, d1!.Attributes!.MessageGroupId]).toEqual([
      p1.MessageId,
      'poison 1',
      'g',
    ]);
    expect([d2!.MessageId, d2!.Body, d2!.Attributes!.MessageGroupId]).toEqual([
      p2.MessageId,
      'poison 2',
      'g',
    ]);
  });

  it('ReceiveRequestAttemptId: the same receive sent again answers the same messages and receipt handles, on any replica, until one of them changes', async () => {
    const url = await createFifo('fifo-attempt.fifo', { ContentBasedDeduplication: 'true' });
    for (const [body, group] of [
      ['f1', 'f'],
      ['f2', 'f'],
      ['h1', 'h'],
    ] as const)
      await send(url, body, group);
    const attempt = (client: typeof sqs, id: string, extra: Record<string, unknown> = {}) =>
      client
        .send(
          new ReceiveMessageCommand({
            QueueUrl: url,
            MaxNumberOfMessages: 10,
            ReceiveRequestAttemptId: id,
            MessageSystemAttributeNames: ['All'],
            ...extra,
          }),
        )
        .then((out) => out.Messages ?? []);
    const leases = async () =>
      (
        await sql<{ until: string }>`SELECT lease_expires_at::text AS until FROM baton.jobs
          WHERE queue = 'fifo-attempt.fifo' ORDER BY id`.execute(database.db)
      ).rows.map((r) => r.until);

    const first = await attempt(sqs, 'try-1', { VisibilityTimeout: 60 });
    expect(bodies(first)).toEqual(['f1', 'f2', 'h1']);
    const before = await leases();
    // Sent again, to the other replica: the same messages, the same receipt handles, the receive
    // counted once, the visibility timeout started again.
    const again = await attempt(sqs2, 'try-1', { VisibilityTimeout: 60 });
    expect(again.map((m) => [m.MessageId, m.ReceiptHandle, m.Attributes!.ApproximateReceiveCount])).toEqual(
      first.map((m) => [m.MessageId, m.ReceiptHandle, '1']),
    );
    const after = await leases();
    for (const [i, until] of after.entries()) expect(until > before[i]!).toBe(true);
    // Another attempt id is another receive: everything is in flight.
    expect(await attempt(sqs, 'try-2')).toEqual([]);
    // The same id from another caller (another access key), or on another queue, is not this attempt.
    const stranger = sqsClient(server.url, { credentials: { accessKeyId: 'OTHER', secretAccessKey: 'x' } });
    try {
      expect(
        await stranger.send(
          new ReceiveMessageCommand({
            QueueUrl: url,
            MaxNumberOfMessages: 10,
            ReceiveRequestAttemptId: 'try-1',
          }),
        ),
      ).not.toHaveProperty('Messages');
    } finally {
      stranger.destroy();
    }
    const other = await createFifo('fifo-attempt-other.fifo', { ContentBasedDeduplication: 'true' });
    await send(other, 'o1', 'f');
    const elsewhere = await sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: other,
        MaxNumberOfMessages: 10,
        ReceiveRequestAttemptId: 'try-1',
      }),
    );
    expect(bodies(elsewhere.Messages ?? [])).toEqual(['o1']);

    // Once one of its messages is deleted, the attempt cannot be sent again.
    await remove(url, first[0]!);
    const refused = await failure(attempt(sqs, 'try-1'));
    expect(refused.name).toBe('InvalidParameterValue');
    expect(refused.message).toMatch(/ReceiveRequestAttemptId is invalid.*not valid anymore/);
    // Nor once one timed out (its visibility changed or ran out).
    await timeOut(first[2]!);
    const [h1] = await attempt(sqs, 'try-3');
    expect(h1!.Body).toBe('h1');
    await sqs.send(
      new ChangeMessageVisibilityCommand({
        QueueUrl: url,
        ReceiptHandle: h1!.ReceiptHandle!,
        VisibilityTimeout: 90,
      }),
    );
    expect((await failure(attempt(sqs, 'try-3'))).name).toBe('InvalidParameterValue');

    // After five minutes the id is new again; the leader forgets attempts past the window.
    await sql`UPDATE baton.receive_attempts SET created_at = now() - interval '301 seconds'
              WHERE queue = 'fifo-attempt.fifo' AND attempt_id = 'try-3'`.execute(database.db);
    expect(await attempt(sqs, 'try-3')).toEqual([]);
    await sql`UPDATE baton.receive_attempts SET created_at = now() - interval '301 seconds'`.execute(
      database.db,
    );
    const results = await server.app.maintainer!.runOnce();
    expect(results.sqs_receive_attempts).toBeGreaterThan(0);
    const { rows } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM baton.receive_attempts`.execute(
      database.db,
    );
    expect(rows[0]!.n).toBe(0);
  });

  it('ReceiveRequestAttemptId is checked (1-128 letters, digits and punctuation) and, as in SQS, ignored on a standard queue', async () => {
    const url = await createFifo('fifo-attempt-check.fifo');
    for (const id of ['has space', 'x'.repeat(129)]) {
      const err = await failure(
        sqs.send(new ReceiveMessageCommand({ QueueUrl: url, ReceiveRequestAttemptId: id })),
      );
      expect(err.name, id).toBe('InvalidParameterValue');
    }
    const standard = (await sqs.send(new CreateQueueCommand({ QueueName: 'attempt-standard' }))).QueueUrl!;
    await sqs.send(new SendMessageCommand({ QueueUrl: standard, MessageBody: 'one' }));
    await sqs.send(new SendMessageCommand({ QueueUrl: standard, MessageBody: 'two' }));
    const receive1 = (id: string) =>
      sqs.send(new ReceiveMessageCommand({ QueueUrl: standard, ReceiveRequestAttemptId: id }));
    const a = await receive1('same');
    const b = await receive1('same');
    expect(bodies([...(a.Messages ?? []), ...(b.Messages ?? [])]).sort()).toEqual(['one', 'two']);
  });

  it("stays FIFO: Baton's own API refuses a group limit other than 1 on it", async () => {
    await createFifo('fifo-native.fifo');
    const client = api(server.app);
    for (const limit of [2, null]) {
      const res = await client.call('PUT', '/v1/queues/fifo-native.fifo', { group_concurrency_limit: limit });
      expect(res.status, String(limit)).toBe(400);
      expect(res.body.errors).toEqual([
        {
          field: 'group_concurrency_limit',
          message: expect.stringMatching(/must stay 1 on an SQS FIFO queue/),
        },
      ]);
    }
    expect(
      (await client.call('PUT', '/v1/queues/fifo-native.fifo', { group_concurrency_limit: 1 })).status,
    ).toBe(200);
    // Other settings are fine, and so is a limit on a standard queue.
    expect((await client.call('PUT', '/v1/queues/fifo-native.fifo', { concurrency_limit: 5 })).status).toBe(
      200,
    );
    await sqs.send(new CreateQueueCommand({ QueueName: 'fifo-native-standard' }));
    expect(
      (await client.call('PUT', '/v1/queues/fifo-native-standard', { group_concurrency_limit: 2 })).status,
    ).toBe(200);
    // A group's own limit: above 1 refused; 1, or null (the queue's 1), and other overrides allowed.
    const group = '/v1/queues/fifo-native.fifo/groups/tenant%2F1';
    const three = await client.call('PUT', group, { concurrency_limit: 3 });
    expect([three.status, three.body.errors?.[0]?.field]).toEqual([400, 'concurrency_limit']);
    for (const body of [
      { concurrency_limit: 1 },
      { concurrency_limit: null },
      { weight: 3, paused: false },
    ]) {
      expect((await client.call('PUT', group, body)).status, JSON.stringify(body)).toBe(200);
    }
    expect((await client.call('GET', group)).body).toMatchObject({ concurrency_limit: 1, weight: 3 });
  });
});
