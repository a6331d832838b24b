import http from 'node:http';
import { CreateQueueCommand, SendMessageCommand } from '@aws-sdk/client-sqs';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseSchedules } from '../../src/schedules/file.js';
import { failure, sqsClient } from '../sqs/support.js';
import { useListeningApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';

/**
 * "." and ".." cannot be carried by a URL: browsers, fetch and curl remove such a path segment (also
 * written %2e%2e), so a request about group ".." of queue q reaches /v1/queues/q/ instead. No protocol
 * may make a queue, group or schedule of such a name; a write whose path ends in "/" (what is left
 * when a client removed one) is refused; rows made before the rule stay readable and removable by a
 * client that sends its path as is. Requests here go over a socket exactly as written (app.inject and
 * fetch would normalise the path first).
 */
const database = useTestDatabase();
const server = useListeningApp(database);
let client: ReturnType<typeof sqsClient>;
beforeAll(() => {
  client = sqsClient(server.url, { maxAttempts: 1 });
});
afterAll(() => client?.destroy());

/** A request with its path sent byte for byte (as `curl --path-as-is` does). */
function raw(method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
  const { port } = new URL(server.url);
  const text = body === undefined ? undefined : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        method,
        path,
        headers: text === undefined ? {} : { 'content-type': 'application/json' },
      },
      (res) => {
        let data = '';
        res.on('data', (chunk) => {
          data += chunk;
        });
        res.on('end', () => resolve({ status: res.statusCode!, body: data ? JSON.parse(data) : undefined }));
      },
    );
    req.on('error', reject);
    req.end(text);
  });
}

const fields = (res: { body: any }) => (res.body?.errors ?? []).map((e: { field: string }) => e.field);

describe('names made only of dots', () => {
  it('are refused as queue, group and schedule names on the native API, naming the field', async () => {
    for (const name of ['.', '..', '%2e%2e', '%2E.']) {
      for (const [method, path, body] of [
        ['PUT', `/v1/queues/${name}`, {}],
        ['POST', `/v1/queues/${name}/jobs`, { payload: 1 }],
        ['POST', `/v1/queues/${name}/jobs/batch`, { jobs: [{ payload: 1 }] }],
      ] as const) {
        const res = await raw(method, path, body);
        expect(res.status, `${method} ${path}`).toBe(400);
        expect(fields(res), `${method} ${path}`).toEqual(['queue']);
        expect(res.body.errors[0].message).toMatch(/must not be "\." or "\.\."/);
      }
      const group = await raw('PUT', `/v1/queues/dots/groups/${name}`, { weight: 2 });
      expect(group.status).toBe(400);
      expect(fields(group)).toEqual(['group']);
      const schedule = await raw('PUT', `/v1/schedules/${name}`, { queue: 'dots', cron: '0 * * * *' });
      expect(schedule.status).toBe(400);
      expect(fields(schedule)).toEqual(['name']);
    }
    for (const group of ['.', '..']) {
      const one = await raw('POST', '/v1/queues/dots/jobs', { payload: 1, group });
      expect(one.status).toBe(400);
      expect(fields(one)).toEqual(['group']);
      const batch = await raw('POST', '/v1/queues/dots/jobs/batch', {
        jobs: [{ payload: 1 }, { payload: 2, group }],
      });
      expect(fields(batch)).toEqual(['jobs[1].group']);
      // A nullable field: each way it could have been valid says why not, each naming it.
      const schedule = await raw('PUT', '/v1/schedules/dots-hourly', {
        queue: 'dots',
        cron: '0 * * * *',
        group,
      });
      expect(new Set(fields(schedule))).toEqual(new Set(['group']));
      const target = await raw('PUT', '/v1/schedules/dots-hourly', { queue: group, cron: '0 * * * *' });
      expect(fields(target)).toEqual(['queue']);
    }
    // Nothing was made, and three dots or a dot inside a name are ordinary names.
    const { rows } = await sql<{ n: number }>`
      SELECT (SELECT count(*) FROM baton.queues)::int + (SELECT count(*) FROM baton.schedules)::int AS n`.execute(
      database.db,
    );
    expect(rows[0]!.n).toBe(0);
    expect((await raw('PUT', '/v1/queues/...', {})).status).toBe(201);
    expect((await raw('POST', '/v1/queues/a..b/jobs', { payload: 1, group: '.x' })).status).toBe(201);
  });

  it('are refused by SQS CreateQueue and as a MessageGroupId, and in the schedules file', async () => {
    for (const name of ['.', '..']) {
      const err = await failure(client.send(new CreateQueueCommand({ QueueName: name })));
      expect(err.name).toBe('InvalidParameterValue');
      expect(err.message).toMatch(/QueueName|queue name/);
    }
    const url = (await client.send(new CreateQueueCommand({ QueueName: 'dots-sqs' }))).QueueUrl!;
    const err = await failure(
      client.send(new SendMessageCommand({ QueueUrl: url, MessageBody: 'x', MessageGroupId: '..' })),
    );
    expect(err.name).toBe('InvalidParameterValue');
    expect(err.message).toMatch(/MessageGroupId/);

    const file = (name: string, entry: object) => () =>
      parseSchedules({ schedules: { [name]: { queue: 'q', cron: '0 * * * *', ...entry } } });
    expect(file('..', {})).toThrow(/schedules\.\.\.: a name must not be "\." or "\.\."/);
    expect(file('ok', { queue: '.' })).toThrow(/schedules\.ok\.queue must not be/);
    expect(file('ok', { group: '..' })).toThrow(/schedules\.ok\.group must not be/);
  });
});

describe('a write whose path ends in "/"', () => {
  it('is refused, so a removed ".." cannot turn a group action into one on its queue', async () => {
    expect((await raw('PUT', '/v1/queues/slash', {})).status).toBe(201);
    await raw('POST', '/v1/queues/slash/jobs', { payload: 1 });
    for (const [method, path, body] of [
      ['DELETE', '/v1/queues/slash/', undefined],
      ['DELETE', '/v1/queues/slash/?force=true', undefined],
      ['PUT', '/v1/queues/slash/', { paused: true }],
      ['POST', '/v1/queues/slash/pause/', undefined],
      ['POST', '/v1/queues/slash/purge/', undefined],
      ['POST', '/v1/queues/slash/jobs/', { payload: 2 }],
    ] as const) {
      const res = await raw(method, path, body);
      expect(res.status, `${method} ${path}`).toBe(400);
      expect(res.body.code).toBe('bad_request');
      expect(res.body.detail).toMatch(/ends in "\/"/);
    }
    // Reads keep forgiving it; the queue is there, unpaused, with its one job.
    const queue = await raw('GET', '/v1/queues/slash/');
    expect(queue.status).toBe(200);
    expect(queue.body).toMatchObject({ name: 'slash', paused: false });
    expect((await raw('GET', '/v1/queues/slash/jobs?state=ready')).body.jobs).toHaveLength(1);
  });
});

describe('rows named before the rule', () => {
  it('stay readable and removable through a path sent as it is', async () => {
    // Made as an older version would have: straight into the tables.
    await sql`INSERT INTO baton.queues (name, auto_created) VALUES ('..', false), ('old', false)`.execute(
      database.db,
    );
    await sql`INSERT INTO baton.queue_groups (queue, group_key, paused) VALUES ('old', '..', true)`.execute(
      database.db,
    );
    await sql`INSERT INTO baton.schedules (name, queue, cron, timezone, payload, next_run_at)
              VALUES ('.', 'old', '0 * * * *', 'UTC', 'null', now() + interval '1 hour')`.execute(
      database.db,
    );

    expect((await raw('GET', '/v1/queues/..')).body).toMatchObject({ name: '..' });
    expect((await raw('GET', '/v1/queues/%2E%2E')).body).toMatchObject({ name: '..' });
    expect((await raw('GET', '/v1/queues/old/groups/..')).body).toMatchObject({ group: '..', paused: true });
    expect((await raw('GET', '/v1/schedules/.')).body).toMatchObject({ name: '.', queue: 'old' });

    expect((await raw('DELETE', '/v1/queues/old/groups/..')).status).toBe(200);
    expect((await raw('DELETE', '/v1/schedules/.')).status).toBeLessThan(300);
    expect((await raw('DELETE', '/v1/queues/..')).status).toBeLessThan(300);
    const { rows } = await sql<{ n: number }>`
      SELECT (SELECT count(*) FROM baton.queues WHERE name = '..')::int
           + (SELECT count(*) FROM baton.queue_groups WHERE group_key = '..')::int
           + (SELECT count(*) FROM baton.schedules WHERE name = '.')::int AS n`.execute(database.db);
    expect(rows[0]!.n).toBe(0);
    // The queue "old" itself was never touched by any of it.
    expect((await raw('GET', '/v1/queues/old')).status).toBe(200);
  });
});

describe('beside honest traffic', () => {
  it('the refusals cost the honest side nothing: no 5xx, every job done once', async () => {
    let stop = false;
    const honestStatuses: number[] = [];
    const honest = (async () => {
      let done = 0;
      while (!stop) {
        const enq = await raw('POST', '/v1/queues/honest/jobs/batch', {
          jobs: [{ payload: 1 }, { payload: 2, group: 'g' }],
        });
        honestStatuses.push(enq.status);
        const claim = await raw('POST', '/v1/queues/honest/claim', { max_jobs: 10 });
        honestStatuses.push(claim.status);
        for (const job of claim.body?.jobs ?? []) {
          const ack = await raw('POST', `/v1/jobs/${job.id}/ack`, { lease_token: job.lease_token });
          honestStatuses.push(ack.status);
          done++;
        }
      }
      return done;
    })();
    const hostile: number[] = [];
    for (let round = 0; round < 20; round++) {
      for (const [method, path, body] of [
        ['PUT', '/v1/queues/..', {}],
        ['POST', '/v1/queues/honest/jobs', { payload: 1, group: '..' }],
        ['PUT', '/v1/queues/honest/groups/%2e', { weight: 2 }],
        ['DELETE', '/v1/queues/honest/', undefined],
        ['POST', '/v1/queues/honest/pause/', undefined],
      ] as const) {
        hostile.push((await raw(method, path, body)).status);
      }
      const sqsRefusal = await failure(client.send(new CreateQueueCommand({ QueueName: '..' })));
      hostile.push(sqsRefusal.$metadata.httpStatusCode);
    }
    stop = true;
    const done = await honest;
    expect(new Set(hostile)).toEqual(new Set([400]));
    expect(honestStatuses.filter((s) => s >= 400)).toEqual([]);
    expect(done).toBeGreaterThan(0);
    // The queue the hostile side aimed at is there, not paused, and holds only the honest side's jobs.
    expect((await raw('GET', '/v1/queues/honest')).body).toMatchObject({ name: 'honest', paused: false });
  });
});
