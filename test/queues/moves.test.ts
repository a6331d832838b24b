import {
  ChangeMessageVisibilityCommand,
  CreateQueueCommand,
  ReceiveMessageCommand,
  SendMessageCommand,
} from '@aws-sdk/client-sqs';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { advanceMessageMove } from '../../src/jobs/message-moves.js';
import { sqsClient } from '../sqs/support.js';
import { useListeningApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { apiKeyEntry, bearer, sqsPairOf } from '../support/keys.js';

/**
 * Moves on the native API (POST /v1/queues/{queue}/moves): a dead-letter queue's jobs back to the
 * queues they died in, or a queue's ready jobs to a named queue. A key limited to queue patterns is a
 * tenant boundary here too: it moves jobs only into queues it may use, checked by the leader's
 * statement itself. Tenant A's keys are limited to `a.*`, B's to `b.*`; B's queue `b.src` has A's
 * `a.dlq` as its dead-letter queue (an operator's doing), so `a.dlq` holds messages of both.
 */
const database = useTestDatabase();
const server = useListeningApp(database, {
  BATON_MAINTENANCE: 'true',
  BATON_TICK_MS: '600000',
  BATON_API_KEYS: JSON.stringify([
    apiKeyEntry('root', ['admin']),
    apiKeyEntry('a-admin', ['admin'], ['a.*']),
    apiKeyEntry('b-admin', ['admin'], ['b.*']),
  ]),
  BATON_SQS_CREDENTIALS: JSON.stringify([sqsPairOf('root')]),
});
let sqs: ReturnType<typeof sqsClient>;
beforeAll(() => {
  const pair = sqsPairOf('root');
  sqs = sqsClient(server.url, {
    credentials: { accessKeyId: pair.access_key_id, secretAccessKey: pair.secret_access_key },
  });
});
afterAll(() => sqs?.destroy());

const urlOf = (queue: string) => `${server.url}/000000000000/${queue}`;
const runDuties = () => server.app.maintainer!.runOnce();
const call = async (method: 'GET' | 'POST', url: string, who: string, payload?: object) => {
  const res = await server.app.inject({ method, url, headers: bearer(who), ...(payload ? { payload } : {}) });
  return { status: res.statusCode, body: res.json() };
};

/** A source queue whose messages die on their first receive, into `dlq`. */
async function sourceInto(source: string, dlq: string) {
  await sqs.send(new CreateQueueCommand({ QueueName: dlq }));
  const RedrivePolicy = JSON.stringify({
    deadLetterTargetArn: `arn:aws:sqs:us-east-1:000000000000:${dlq}`,
    maxReceiveCount: 1,
  });
  await sqs.send(new CreateQueueCommand({ QueueName: source, Attributes: { RedrivePolicy } }));
}

async function killInto(source: string, n: number) {
  for (let i = 0; i < n; i++) {
    await sqs.send(new SendMessageCommand({ QueueUrl: urlOf(source), MessageBody: `${source} ${i}` }));
  }
  for (let left = n; left > 0; ) {
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
}

/** Ready jobs per queue, read from the table (what claims would get). */
async function readyIn(...queues: string[]) {
  const { rows } = await sql<{ queue: string; n: string }>`
    SELECT queue, count(*) AS n FROM baton.jobs WHERE queue = ANY(${queues}::text[]) AND state = 'ready'
    GROUP BY queue`.execute(server.app.db);
  return Object.fromEntries(queues.map((q) => [q, Number(rows.find((r) => r.queue === q)?.n ?? 0)]));
}

describe('moves on the native API', () => {
  it("a tenant's move sends back only what died in its own queues; another tenant's jobs stay", async () => {
    await sourceInto('a.src', 'a.dlq');
    const RedrivePolicy = JSON.stringify({
      deadLetterTargetArn: 'arn:aws:sqs:us-east-1:000000000000:a.dlq',
      maxReceiveCount: 1,
    });
    await sqs.send(new CreateQueueCommand({ QueueName: 'b.src', Attributes: { RedrivePolicy } }));
    await killInto('a.src', 2);
    await killInto('b.src', 3);
    expect(await readyIn('a.dlq', 'a.src', 'b.src')).toEqual({ 'a.dlq': 5, 'a.src': 0, 'b.src': 0 });

    // B cannot see or move A's queue; A cannot name B's queue as the destination.
    expect((await call('GET', '/v1/queues/a.dlq/moves', 'b-admin')).status).toBe(403);
    expect((await call('POST', '/v1/queues/a.dlq/moves', 'b-admin', {})).status).toBe(403);
    const named = await call('POST', '/v1/queues/a.dlq/moves', 'a-admin', { destination: 'b.src' });
    expect([named.status, named.body.code]).toEqual([403, 'forbidden']);

    // Where a move would send them back: the key sees its own queues only.
    expect((await call('GET', '/v1/queues/a.dlq/moves', 'a-admin')).body).toEqual({
      moves: [],
      dead_letter_sources: ['a.src'],
    });
    expect((await call('GET', '/v1/queues/a.dlq/moves', 'root')).body.dead_letter_sources).toEqual([
      'a.src',
      'b.src',
    ]);

    const started = await call('POST', '/v1/queues/a.dlq/moves', 'a-admin', {});
    expect(started.status).toBe(201);
    expect(started.body).toMatchObject({
      queue: 'a.dlq',
      destination: null,
      status: 'running',
      to_move: 5,
      moved: 0,
    });
    await runDuties();
    const [move] = (await call('GET', '/v1/queues/a.dlq/moves', 'a-admin')).body.moves;
    expect(move).toMatchObject({ id: started.body.id, status: 'failed', moved: 2, to_move: 5 });
    expect(move.failure_reason).toContain('3 message(s) could not be moved');
    expect(move.finished_at).toEqual(expect.any(String));
    expect(await readyIn('a.dlq', 'a.src', 'b.src')).toEqual({ 'a.dlq': 3, 'a.src': 2, 'b.src': 0 });

    const finished = await call('POST', `/v1/queues/a.dlq/moves/${move.id}/cancel`, 'a-admin');
    expect([finished.status, finished.body.code]).toEqual([409, 'move_finished']);

    // A key that may use every queue sends B's back to B.
    expect((await call('POST', '/v1/queues/a.dlq/moves', 'root', {})).status).toBe(201);
    await runDuties();
    expect(await readyIn('a.dlq', 'a.src', 'b.src')).toEqual({ 'a.dlq': 0, 'a.src': 2, 'b.src': 3 });
    const moves = (await call('GET', '/v1/queues/a.dlq/moves', 'root')).body.moves;
    expect(moves.map((m: { status: string; moved: number }) => [m.status, m.moved])).toEqual([
      ['completed', 3],
      ['failed', 2],
    ]);
  });

  it('a queue that is no dead-letter queue moves only to a named destination; bad input is a 400 naming the field', async () => {
    await call('POST', '/v1/queues/a.plain/jobs/batch', 'root', { jobs: [{ payload: 1 }, { payload: 2 }] });
    await call('POST', '/v1/queues/a.target/jobs', 'root', { payload: 0 });
    const none = await call('POST', '/v1/queues/a.plain/moves', 'root', {});
    expect([none.status, none.body.errors?.[0]?.field]).toEqual([400, 'destination']);
    const rate = await call('POST', '/v1/queues/a.plain/moves', 'root', {
      destination: 'a.target',
      max_per_second: 0,
    });
    expect([rate.status, rate.body.errors?.[0]?.field]).toEqual([400, 'max_per_second']);
    const unknown = await call('POST', '/v1/queues/a.plain/moves', 'root', { destination: 'a.nowhere' });
    expect([unknown.status, unknown.body.code]).toEqual([404, 'queue_not_found']);
    const missing = await call('GET', '/v1/queues/a.nothing/moves', 'root');
    expect(missing.status).toBe(404);
    const badId = await call('POST', '/v1/queues/a.plain/moves/not-a-uuid/cancel', 'root');
    expect(badId.status).toBe(400);

    const started = await call('POST', '/v1/queues/a.plain/moves', 'root', { destination: 'a.target' });
    expect(started.status).toBe(201);
    const running = await call('POST', '/v1/queues/a.plain/moves', 'root', { destination: 'a.target' });
    expect([running.status, running.body.code]).toEqual([409, 'move_running']);
    await runDuties();
    expect(await readyIn('a.plain', 'a.target')).toEqual({ 'a.plain': 0, 'a.target': 3 });
  });

  it('moves racing claims of the same queue, and two leaders driving one move: no job both moved and claimed, none lost', async () => {
    const n = 400;
    for (let i = 0; i < n; i += 100) {
      const jobs = Array.from({ length: 100 }, (_, k) => ({ payload: i + k }));
      expect((await call('POST', '/v1/queues/a.race/jobs/batch', 'root', { jobs })).status).toBe(201);
    }
    await call('POST', '/v1/queues/a.race-to/jobs', 'root', { payload: 'first' });
    const started = await call('POST', '/v1/queues/a.race/moves', 'root', { destination: 'a.race-to' });
    expect(started.body.to_move).toBe(n);
    const db = server.app.db;
    const acked = new Set<string>();
    let done = false;
    const claimer = async () => {
      while (!done) {
        const { body } = await call('POST', '/v1/queues/a.race/claim', 'root', { max_jobs: 7 });
        if (body.jobs.length === 0) return;
        for (const job of body.jobs) {
          const ack = await call('POST', `/v1/jobs/${job.id}/ack`, 'root', { lease_token: job.lease_token });
          expect(ack.status).toBe(200);
          expect(acked.has(job.id)).toBe(false);
          acked.add(job.id);
        }
      }
    };
    const leader = async () => {
      while (true) {
        const step = await advanceMessageMove(db, started.body.id, 5, null);
        if (step && step.status !== 'running') return;
        if (!step) await new Promise((r) => setTimeout(r, 1));
        const { rows } = await sql<{ status: string }>`
          SELECT status FROM baton.message_moves WHERE id = ${started.body.id}::uuid`.execute(db);
        if (rows[0]!.status !== 'running') return;
      }
    };
    await Promise.all([claimer(), claimer(), claimer(), leader(), leader()]);
    done = true;

    const { rows } = await sql<{ id: string; queue: string; state: string }>`
      SELECT id::text, queue, state FROM baton.jobs WHERE queue IN ('a.race', 'a.race-to')
      UNION ALL
      SELECT id::text, queue, state FROM baton.job_history WHERE queue IN ('a.race', 'a.race-to')`.execute(
      db,
    );
    const moved = rows.filter((r) => r.queue === 'a.race-to' && r.state === 'ready');
    const completed = rows.filter((r) => r.queue === 'a.race' && r.state === 'completed');
    expect(completed.length).toBe(acked.size);
    // Every job once: acked where it was, or ready where it moved (plus the target's own job).
    expect(moved.length - 1 + completed.length).toBe(n);
    expect(new Set(rows.map((r) => r.id)).size).toBe(rows.length);
    console.info(`moves racing claims: ${moved.length - 1} moved, ${completed.length} acked`);
    const [move] = (await call('GET', '/v1/queues/a.race/moves', 'root')).body.moves;
    expect(move).toMatchObject({ status: 'completed', moved: moved.length - 1 });
  });
});
