import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BatonApp } from '../../src/app.js';
import { createTestApp, useTestApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { api } from '../support/http.js';

const database = useTestDatabase();
const app = useTestApp(database);

describe('enqueue one job', () => {
  it('answers 201 with the job, ready when due now', async () => {
    const res = await api(app).enqueue('e-one', {
      payload: { to: 'ada@example.com' },
      priority: 7,
      max_attempts: 3,
    });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({
      id: expect.stringMatching(/^\d+$/),
      queue: 'e-one',
      state: 'ready',
      priority: 7,
      attempts: 0,
      max_attempts: 3,
      idempotency_key: null,
    });
    expect(Date.parse(res.body.run_at)).toBeLessThanOrEqual(Date.now() + 1000);
    const row = await database.db
      .selectFrom('baton.jobs')
      .selectAll()
      .where('id', '=', res.body.id)
      .executeTakeFirstOrThrow();
    expect(row).toMatchObject({ state: 'ready', payload: { to: 'ada@example.com' }, priority: 7 });
  });

  it('schedules a job with delay_ms or a future run_at, and readies one with a past run_at', async () => {
    const delayed = await api(app).enqueue('e-sched', { payload: 1, delay_ms: 60_000 });
    expect(delayed.body.state).toBe('scheduled');
    expect(Date.parse(delayed.body.run_at) - Date.parse(delayed.body.created_at)).toBeGreaterThanOrEqual(
      59_000,
    );
    const future = await api(app).enqueue('e-sched', { payload: 2, run_at: '2999-01-01T00:00:00Z' });
    expect(future.body).toMatchObject({ state: 'scheduled', run_at: '2999-01-01T00:00:00.000Z' });
    const past = await api(app).enqueue('e-sched', { payload: 3, run_at: '2001-01-01T00:00:00Z' });
    expect(past.body.state).toBe('ready');
  });

  it('uses the server default for max_attempts and priority 0', async () => {
    const res = await api(app).enqueue('e-defaults', { payload: null });
    expect(res.body).toMatchObject({ priority: 0, max_attempts: 5 });
  });

  it('keeps any JSON payload as it was given', async () => {
    for (const payload of [
      null,
      0,
      'text',
      [1, 'two', { three: 3 }],
      { nested: { deep: [true, false] } },
      'ünïcödé 🎉',
    ]) {
      const res = await api(app).enqueue('e-payloads', { payload });
      const job = await api(app).get(res.body.id);
      expect(job.body.payload).toEqual(payload);
    }
  });

  it.each([
    [{ payload: 1, delay_ms: 5, run_at: '2030-01-01T00:00:00Z' }, 'run_at cannot be given with delay_ms'],
    [{ payload: 1, priority: 1.5 }, 'priority must be integer'],
    [{ payload: 1, priority: '1' }, 'priority must be integer'],
    [{ payload: 1, max_attempts: 0 }, 'max_attempts must be >= 1'],
    [{ payload: 1, delay_ms: -1 }, 'delay_ms must be >= 0'],
    [{ payload: 1, run_at: 'tomorrow' }, 'run_at must be an RFC 3339 date-time'],
    [
      { payload: 1, run_at: '0000-01-01T00:00:00Z' },
      'run_at must be an RFC 3339 date-time between 1970 and 9999',
    ],
    [{ payload: 1, idempotency_key: '' }, 'idempotency_key must NOT have fewer than 1 characters'],
    [{ payload: 1, idempotency_key: 'a\u0000b' }, 'idempotency_key must not contain control characters'],
    [{ payload: 'nul \u0000 inside' }, 'payload must not contain the NUL character (\\u0000)'],
    [{ payload: { a: '\ud800' } }, 'payload must not contain an unpaired UTF-16 surrogate'],
    [{ priority: 1 }, 'payload is required'],
    [{ payload: 1, delay: 5 }, 'delay is not a known field'],
  ])('rejects %j with a 400 naming the field', async (body, detail) => {
    const res = await api(app).enqueue('e-bad', body);
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('validation_failed');
    expect(res.body.detail).toContain(detail);
  });

  it('a value that fits none of a field’s forms is one error naming the field, not one per form', async () => {
    const number = await api(app).enqueue('e-bad', { payload: 1, depends_on: [99] });
    expect(number.body.errors).toEqual([{ field: 'depends_on[0]', message: 'must be string or object' }]);
    const object = await api(app).enqueue('e-bad', { payload: 1, depends_on: [{ id: '99' }] });
    expect(object.body.errors).toEqual([{ field: 'depends_on[0].item', message: 'is required' }]);
    const nullable = await api(app).call('PUT', '/v1/queues/e-bad', { lease_ms: 'long' });
    expect(nullable.status).toBe(400);
    expect(nullable.body.errors).toHaveLength(1);
    expect(nullable.body.errors[0].message).not.toContain('anyOf');
  });

  it('rejects a bad queue name with a 400 naming it', async () => {
    const res = await api(app).enqueue('bad%20name', { payload: 1 });
    expect(res.status).toBe(400);
    expect(res.body.detail).toMatch(/^queue must be a queue name/);
    const long = await api(app).enqueue('q'.repeat(129), { payload: 1 });
    expect(long.status).toBe(400);
  });

  it('rejects a payload over the limit with 413 payload_too_large', async () => {
    const res = await api(app).enqueue('e-big', { payload: 'x'.repeat(256 * 1024) });
    expect(res.status).toBe(413);
    expect(res.body).toMatchObject({ code: 'payload_too_large' });
    expect(res.body.detail).toMatch(/^payload is \d+ bytes of JSON; the limit is 262144$/);
  });

  it('rejects nesting deeper than 64 levels', async () => {
    let payload: unknown = 1;
    for (let i = 0; i < 70; i++) payload = [payload];
    const res = await api(app).enqueue('e-deep', { payload });
    expect(res.status).toBe(400);
    expect(res.body.detail).toMatch(/payload must not nest/);
  });

  it('stores nothing when a request is rejected', async () => {
    const before = await database.db
      .selectFrom('baton.jobs')
      .select(sql<number>`count(*)::int`.as('n'))
      .executeTakeFirstOrThrow();
    await api(app).enqueue('e-nothing', { payload: 'x'.repeat(300 * 1024) });
    await api(app).enqueueBatch('e-nothing', [{ payload: 1 }, { payload: 2, priority: 'high' }]);
    const after = await database.db
      .selectFrom('baton.jobs')
      .select(sql<number>`count(*)::int`.as('n'))
      .executeTakeFirstOrThrow();
    expect(after.n).toBe(before.n);
  });
});

describe('enqueue a batch', () => {
  it('answers 201 with the jobs in request order', async () => {
    const jobs = Array.from({ length: 250 }, (_, i) => ({ payload: { i }, priority: i % 3 }));
    const res = await api(app).enqueueBatch('e-batch', jobs);
    expect(res.status).toBe(201);
    expect(res.body.jobs).toHaveLength(250);
    const ids = res.body.jobs.map((j: { id: string }) => j.id);
    for (let i = 0; i < 250; i++) {
      expect(res.body.jobs[i]).toMatchObject({ priority: i % 3, created: true });
      const stored = await api(app).get(ids[i]);
      expect(stored.body.payload).toEqual({ i });
    }
  });

  it('accepts 1,000 jobs and refuses 1,001', async () => {
    const ok = await api(app).enqueueBatch(
      'e-batch-max',
      Array.from({ length: 1000 }, () => ({ payload: 1 })),
    );
    expect(ok.status).toBe(201);
    const tooMany = await api(app).enqueueBatch(
      'e-batch-max',
      Array.from({ length: 1001 }, () => ({ payload: 1 })),
    );
    expect(tooMany.status).toBe(400);
    expect(tooMany.body.detail).toBe('jobs must NOT have more than 1000 items');
  });

  it('rejects the whole batch when one item is invalid, naming its index and field', async () => {
    const res = await api(app).enqueueBatch('e-batch-bad', [
      { payload: 1 },
      { payload: 2 },
      { payload: 3, max_attempts: -4 },
    ]);
    expect(res.status).toBe(400);
    expect(res.body.detail).toBe('jobs[2].max_attempts must be >= 1');
    expect(res.body.errors).toEqual([{ field: 'jobs[2].max_attempts', message: 'must be >= 1' }]);
    const tooBig = await api(app).enqueueBatch('e-batch-bad', [
      { payload: 1 },
      { payload: 'x'.repeat(300_000) },
    ]);
    expect(tooBig.status).toBe(413);
    expect(tooBig.body.detail).toMatch(/^jobs\[1\]\.payload is/);
    const count = await database.db
      .selectFrom('baton.jobs')
      .select('id')
      .where('queue', '=', 'e-batch-bad')
      .execute();
    expect(count).toHaveLength(0);
  });
});

describe('enqueue a batch with Prefer: return=minimal', () => {
  const send = (jobs: object[], prefer: string) =>
    app.inject({
      method: 'POST',
      url: '/v1/queues/e-minimal/jobs/batch',
      headers: { prefer },
      payload: { jobs },
    });

  it("answers each job's id and created only, in request order, and says the preference was applied", async () => {
    const res = await send(
      [
        { payload: { n: 0 } },
        { payload: { n: 1 }, idempotency_key: 'm1' },
        { payload: { n: 2 }, delay_ms: 60_000 },
      ],
      'return=minimal',
    );
    expect(res.statusCode).toBe(201);
    expect(res.headers['preference-applied']).toBe('return=minimal');
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    const body = res.json();
    expect(body.jobs).toHaveLength(3);
    for (const job of body.jobs) expect(Object.keys(job).sort()).toEqual(['created', 'id']);
    expect(body.jobs.map((j: { created: boolean }) => j.created)).toEqual([true, true, true]);
    // The ids are the jobs, in request order.
    for (const [i, job] of body.jobs.entries()) {
      const stored = await api(app).get(job.id);
      expect(stored.body.payload).toEqual({ n: i });
    }
    expect((await api(app).get(body.jobs[2].id)).body.state).toBe('scheduled');

    // A repeated idempotency key: created false, the original id.
    const again = await send([{ payload: { n: 9 }, idempotency_key: 'm1' }], 'return=minimal');
    expect(again.json().jobs).toEqual([{ id: body.jobs[1].id, created: false }]);
  });

  it('finds the preference among others, in any case, and ignores preferences it does not know', async () => {
    const among = await send([{ payload: 1 }], 'respond-async, RETURN = minimal; x=1');
    expect(among.headers['preference-applied']).toBe('return=minimal');
    expect(Object.keys(among.json().jobs[0]).sort()).toEqual(['created', 'id']);
    for (const prefer of ['return=representation', 'handling=lenient', 'return=minimalist']) {
      const full = await send([{ payload: 1 }], prefer);
      expect(full.statusCode).toBe(201);
      expect(full.headers['preference-applied']).toBeUndefined();
      expect(full.json().jobs[0]).toMatchObject({ queue: 'e-minimal', state: 'ready', created: true });
    }
  });

  it('still rejects a bad batch with a 400 naming the field, and stores nothing', async () => {
    const res = await send([{ payload: 1 }, { payload: 2, priority: 'high' }], 'return=minimal');
    expect(res.statusCode).toBe(400);
    expect(res.json().errors[0].field).toBe('jobs[1].priority');
  });
});

describe('idempotency keys', () => {
  it('a repeated key returns 200 with the original job and creates nothing', async () => {
    const first = await api(app).enqueue('e-idem', { payload: { n: 1 }, idempotency_key: 'order-17' });
    expect(first.status).toBe(201);
    const again = await api(app).enqueue('e-idem', { payload: { n: 2 }, idempotency_key: 'order-17' });
    expect(again.status).toBe(200);
    expect(again.body).toEqual(first.body);
    const rows = await database.db
      .selectFrom('baton.jobs')
      .select('id')
      .where('queue', '=', 'e-idem')
      .execute();
    expect(rows).toHaveLength(1);
    // The same key on another queue is another job.
    const other = await api(app).enqueue('e-idem-2', { payload: 1, idempotency_key: 'order-17' });
    expect(other.status).toBe(201);
    expect(other.body.id).not.toBe(first.body.id);
  });

  it('still returns the original job after it finished', async () => {
    const first = await api(app).enqueue('e-idem-done', { payload: 1, idempotency_key: 'k' });
    const claimed = await api(app).claim('e-idem-done');
    await api(app).ack(first.body.id, { lease_token: claimed.body.jobs[0].lease_token });
    const again = await api(app).enqueue('e-idem-done', { payload: 1, idempotency_key: 'k' });
    expect(again.status).toBe(200);
    expect(again.body.id).toBe(first.body.id);
  });

  it('creates a new job once the key has expired', async () => {
    const first = await api(app).enqueue('e-idem-exp', { payload: 1, idempotency_key: 'k' });
    await sql`UPDATE baton.idempotency_keys SET expires_at = now() - interval '1 second' WHERE queue = 'e-idem-exp'`.execute(
      database.db,
    );
    const again = await api(app).enqueue('e-idem-exp', { payload: 1, idempotency_key: 'k' });
    expect(again.status).toBe(201);
    expect(again.body.id).not.toBe(first.body.id);
  });

  it('takes over a key whose job is gone (pruned as the key expired) instead of failing', async () => {
    // The prune's clock saw the key expire and removed the finished job; this enqueue's earlier clock
    // still sees the key live. Made to hold here by removing the job under a live key.
    const first = await api(app).enqueue('e-idem-gone', { payload: 1, idempotency_key: 'k' });
    await sql`DELETE FROM baton.jobs WHERE id = ${first.body.id}::bigint`.execute(database.db);
    const again = await api(app).enqueue('e-idem-gone', { payload: 2, idempotency_key: 'k' });
    expect(again.status).toBe(201);
    expect(again.body.id).not.toBe(first.body.id);
    // The key names the new job, which the same request answers from now on.
    const third = await api(app).enqueue('e-idem-gone', { payload: 3, idempotency_key: 'k' });
    expect(third.status).toBe(200);
    expect(third.body.id).toBe(again.body.id);
  });

  it('20 concurrent enqueues with one key create exactly one job, and all 20 answers name it', async () => {
    const answers = await Promise.all(
      Array.from({ length: 20 }, () =>
        api(app).enqueue('e-idem-race', { payload: 1, idempotency_key: 'once' }),
      ),
    );
    const ids = new Set(answers.map((a) => a.body.id));
    expect(ids.size).toBe(1);
    expect(answers.filter((a) => a.status === 201)).toHaveLength(1);
    expect(answers.filter((a) => a.status === 200)).toHaveLength(19);
    const rows = await database.db
      .selectFrom('baton.jobs')
      .select('id')
      .where('queue', '=', 'e-idem-race')
      .execute();
    expect(rows).toHaveLength(1);
  });

  it('maps repeated keys inside one batch to one job', async () => {
    const res = await api(app).enqueueBatch('e-idem-batch', [
      { payload: 1, idempotency_key: 'a' },
      { payload: 2 },
      { payload: 3, idempotency_key: 'a' },
    ]);
    expect(res.status).toBe(201);
    const [a, b, c] = res.body.jobs;
    expect(a.id).toBe(c.id);
    expect([a.created, b.created, c.created]).toEqual([true, true, false]);
  });

  it('a batch with keys gets its ids, and so its claim order, in request order, not in key order', async () => {
    // Keys sort z < y < ... the other way round from the items; one item has no key.
    const res = await api(app).enqueueBatch('e-idem-order', [
      { payload: 0, idempotency_key: 'z' },
      { payload: 1, idempotency_key: 'y' },
      { payload: 2 },
      { payload: 3, idempotency_key: 'x' },
      { payload: 4, idempotency_key: 'y' },
      { payload: 5, idempotency_key: 'w' },
    ]);
    expect(res.status).toBe(201);
    const ids = res.body.jobs.map((j: { id: string }) => BigInt(j.id));
    expect(res.body.jobs.map((j: { created: boolean }) => j.created)).toEqual([
      true,
      true,
      true,
      true,
      false,
      true,
    ]);
    const created = [ids[0], ids[1], ids[2], ids[3], ids[5]];
    expect(created).toEqual([...created].sort((a, b) => (a < b ? -1 : 1)));
    expect(ids[4]).toBe(ids[1]);
    const claimed = await api(app).claim('e-idem-order', { max_jobs: 10 });
    expect(claimed.body.jobs.map((j: { payload: number }) => j.payload)).toEqual([0, 1, 2, 3, 5]);
  });

  it('concurrent batches sharing keys in different orders neither deadlock nor duplicate', async () => {
    const keys = Array.from({ length: 30 }, (_, i) => `k${i}`);
    const batches = Array.from({ length: 8 }, (_, b) =>
      [...keys].sort(() => (b % 2 ? 1 : -1)).map((k) => ({ payload: k, idempotency_key: k })),
    );
    const answers = await Promise.all(batches.map((jobs) => api(app).enqueueBatch('e-idem-cross', jobs)));
    expect(answers.every((a) => a.status === 201)).toBe(true);
    const rows = await database.db
      .selectFrom('baton.jobs')
      .select('id')
      .where('queue', '=', 'e-idem-cross')
      .execute();
    expect(rows).toHaveLength(30);
  });
});

describe('queues on first use', () => {
  it('creates an unknown queue as auto-created', async () => {
    await api(app).enqueue('e-auto', { payload: 1 });
    const queue = await database.db
      .selectFrom('baton.queues')
      .selectAll()
      .where('name', '=', 'e-auto')
      .executeTakeFirstOrThrow();
    expect(queue.auto_created).toBe(true);
  });

  it('never rewrites the queue row on the enqueue path', async () => {
    await api(app).enqueue('e-untouched', { payload: 0 });
    const before = await sql<{ ctid: string; xmin: string }>`
      SELECT ctid::text, xmin::text FROM baton.queues WHERE name = 'e-untouched'`.execute(database.db);
    await Promise.all(Array.from({ length: 100 }, (_, i) => api(app).enqueue('e-untouched', { payload: i })));
    await api(app).enqueueBatch(
      'e-untouched',
      Array.from({ length: 100 }, (_, i) => ({ payload: i })),
    );
    const after = await sql<{ ctid: string; xmin: string }>`
      SELECT ctid::text, xmin::text FROM baton.queues WHERE name = 'e-untouched'`.execute(database.db);
    // Same physical row version: no UPDATE (not even a no-op one) happened.
    expect(after.rows[0]).toEqual(before.rows[0]);
  });

  describe('with auto-create off', () => {
    let strict: BatonApp;
    beforeAll(async () => {
      strict = await createTestApp(database, { BATON_AUTO_CREATE_QUEUES: 'false' });
    });
    afterAll(() => strict.close());

    it('an unknown queue is a loud 404 queue_not_found', async () => {
      const res = await api(strict).enqueue('e-missing', { payload: 1 });
      expect(res.status).toBe(404);
      expect(res.body).toMatchObject({
        code: 'queue_not_found',
        detail: expect.stringContaining('e-missing'),
      });
      const batch = await api(strict).enqueueBatch('e-missing', [{ payload: 1 }]);
      expect(batch.status).toBe(404);
      const queue = await database.db
        .selectFrom('baton.queues')
        .select('name')
        .where('name', '=', 'e-missing')
        .execute();
      expect(queue).toHaveLength(0);
    });

    it('an existing queue still takes jobs', async () => {
      await database.db
        .insertInto('baton.queues')
        .values({ name: 'e-explicit', auto_created: false })
        .execute();
      expect((await api(strict).enqueue('e-explicit', { payload: 1 })).status).toBe(201);
    });
  });
});
