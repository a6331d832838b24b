import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { ackEach } from '../../src/jobs/ack.js';
import { claimForGroup } from '../../src/jobs/claim/claim.js';
import { GroupCommit } from '../../src/jobs/group-commit.js';
import { AckGroups, ClaimGroups, EnqueueGroups } from '../../src/jobs/statement-groups.js';
import { useTestApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { api } from '../support/http.js';

const database = useTestDatabase();
const app = useTestApp(database);

describe('group commit', () => {
  it('runs a lone request at once, and groups the requests that arrive while one runs', async () => {
    const groups: number[][] = [];
    const commit = new GroupCommit<number, number>(
      async (items) => {
        groups.push(items);
        await new Promise((r) => setTimeout(r, 20));
        return items.map((n) => n * 10);
      },
      (n) => n,
      10,
    );
    const answers = await Promise.all([1, 2, 3, 4, 5].map((n) => commit.submit(n)));
    expect(answers).toEqual([10, 20, 30, 40, 50]);
    // The first ran alone; the others waited for it and went together, capacity permitting.
    expect(groups).toEqual([[1], [2, 3, 4], [5]]);
  });

  it('fails every request of a failed group, and carries on with the next', async () => {
    let calls = 0;
    const commit = new GroupCommit<number, number>(async (items) => {
      calls++;
      await new Promise((r) => setTimeout(r, 10));
      if (calls === 2) throw new Error('boom');
      return items;
    });
    const results = await Promise.allSettled([1, 2, 3].map((n) => commit.submit(n)));
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'rejected']);
    expect(await commit.submit(4)).toBe(4);
  });
});

describe('a group claim', () => {
  it('deals the picked jobs out in claim order, each claimant its share, lease and worker id', async () => {
    const q = 'gc-claim';
    await api(app).enqueueBatch(
      q,
      Array.from({ length: 10 }, (_, i) => ({ payload: i, priority: i })),
    );
    const [a, b, c] = (
      await claimForGroup(database.db, q, 30_000, [
        { maxJobs: 2, workerId: 'a', leaseMs: 5000 },
        { maxJobs: 3, workerId: 'b' },
        { maxJobs: 100, workerId: 'c', leaseMs: 60_000 },
      ])
    ).map((o) => o.jobs);
    expect(a!.map((j) => j.priority)).toEqual([9, 8]);
    expect(b!.map((j) => j.priority)).toEqual([7, 6, 5]);
    expect(c!.map((j) => j.priority)).toEqual([4, 3, 2, 1, 0]);
    const rows = await sql<{ worker_id: string; lease_ms: number; n: number }>`
      SELECT worker_id, lease_ms, count(*)::int AS n FROM baton.jobs WHERE queue = ${q}
      GROUP BY worker_id, lease_ms ORDER BY worker_id`.execute(database.db);
    expect(rows.rows).toEqual([
      { worker_id: 'a', lease_ms: 5000, n: 2 },
      { worker_id: 'b', lease_ms: 30_000, n: 3 },
      { worker_id: 'c', lease_ms: 60_000, n: 5 },
    ]);
    const tokens = [...a!, ...b!, ...c!].map((j) => j.lease_token);
    expect(new Set(tokens).size).toBe(10);
  });

  it('concurrent claimers through the route still get each job exactly once', async () => {
    const q = 'gc-route';
    await api(app).enqueueBatch(
      q,
      Array.from({ length: 600 }, (_, i) => ({ payload: i })),
    );
    const got = await Promise.all(
      Array.from({ length: 40 }, (_, i) => api(app).claim(q, { max_jobs: 1 + (i % 25) })),
    );
    const ids = got.flatMap((r) => r.body.jobs.map((j: { id: string }) => j.id));
    expect(new Set(ids).size).toBe(ids.length);
    for (const [i, r] of got.entries()) expect(r.body.jobs.length).toBeLessThanOrEqual(1 + (i % 25));
  });
});

describe('a group ack', () => {
  it('answers each item by its own lease: a stale token on the same job is not answered with the winner', async () => {
    const q = 'gc-ack';
    await api(app).enqueue(q, { payload: 1 });
    const [job] = (await api(app).claim(q)).body.jobs;
    const answers = await ackEach(database.db, [
      { id: job.id, leaseToken: '00000000-0000-4000-8000-000000000000' },
      { id: job.id, leaseToken: job.lease_token },
    ]);
    expect(answers[0]).toBeUndefined();
    expect(answers[1]?.state).toBe('completed');
  });

  it('concurrent single acks through the route each get their own answer', async () => {
    const q = 'gc-acks';
    await api(app).enqueueBatch(
      q,
      Array.from({ length: 50 }, (_, i) => ({ payload: i })),
    );
    const jobs = (await api(app).claim(q, { max_jobs: 50 })).body.jobs as {
      id: string;
      lease_token: string;
    }[];
    const answers = await Promise.all(
      jobs.flatMap((j, i) => [
        api(app).ack(j.id, { lease_token: j.lease_token, result: i }),
        api(app).ack(j.id, { lease_token: '00000000-0000-4000-8000-000000000000' }),
      ]),
    );
    for (let i = 0; i < jobs.length; i++) {
      expect(answers[2 * i]!.status).toBe(200);
      expect(answers[2 * i]!.body).toMatchObject({ id: jobs[i]!.id, state: 'completed', result: i });
      expect(answers[2 * i + 1]!.status).toBe(409);
    }
  });
});

describe('grouped enqueues', () => {
  it('concurrent enqueues through the route each get their own jobs, in order, and keys still dedupe', async () => {
    const q = 'gc-enqueue';
    const answers = await Promise.all([
      ...Array.from({ length: 30 }, (_, i) => api(app).enqueue(q, { payload: { single: i } })),
      ...Array.from({ length: 5 }, (_, b) =>
        api(app).enqueueBatch(
          q,
          Array.from({ length: 7 }, (_, i) => ({ payload: { batch: b, i } })),
        ),
      ),
      api(app).enqueue(q, { payload: 'k', idempotency_key: 'same' }),
      api(app).enqueue(q, { payload: 'k', idempotency_key: 'same' }),
    ]);
    for (let i = 0; i < 30; i++) {
      expect(answers[i]!.status).toBe(201);
      expect((await api(app).get(answers[i]!.body.id)).body.payload).toEqual({ single: i });
    }
    for (let b = 0; b < 5; b++) {
      const jobs = answers[30 + b]!.body.jobs;
      expect(jobs).toHaveLength(7);
      for (let i = 0; i < 7; i++)
        expect((await api(app).get(jobs[i].id)).body.payload).toEqual({ batch: b, i });
    }
    const [k1, k2] = [answers[35]!, answers[36]!];
    expect(k1.body.id).toBe(k2.body.id);
    expect([k1.status, k2.status].sort()).toEqual([200, 201]);
    const rows = await sql<{
      n: number;
    }>`SELECT count(*)::int AS n FROM baton.jobs WHERE queue = ${q}`.execute(database.db);
    expect(rows.rows[0]!.n).toBe(30 + 35 + 1);
  });
});

describe('a poisoned member of a group', () => {
  // Values the HTTP schemas now refuse, sent straight to the grouped statements: if one ever slipped
  // past validation, it must fail only its own request.
  const POISON_TOKEN = 'urn:uuid:00000000-0000-4000-8000-000000000000';
  const inputError = expect.objectContaining({ code: expect.stringMatching(/^22/) });

  it('fails only its own ack; the honest acks of the same group complete', async () => {
    const q = 'gc-poison-ack';
    const groups = new AckGroups(database.db);
    await api(app).enqueueBatch(
      q,
      Array.from({ length: 40 }, (_, i) => ({ payload: i })),
    );
    const jobs = (await api(app).claim(q, { max_jobs: 40 })).body.jobs as {
      id: string;
      lease_token: string;
    }[];
    const calls = jobs.flatMap((j, i) => [
      { honest: true, answer: groups.ack({ id: j.id, leaseToken: j.lease_token }) },
      ...(i % 4 === 0 ? [{ honest: false, answer: groups.ack({ id: j.id, leaseToken: POISON_TOKEN }) }] : []),
    ]);
    const answers = await Promise.allSettled(calls.map((c) => c.answer));
    const honest = answers.filter((_, i) => calls[i]!.honest);
    const poisoned = answers.filter((_, i) => !calls[i]!.honest);
    expect(poisoned).toHaveLength(10);
    for (const a of poisoned) expect(a).toEqual({ status: 'rejected', reason: inputError });
    for (const a of honest) {
      expect(a.status === 'fulfilled' && a.value.outcome === 'done' && a.value.value.state).toBe('completed');
    }
  });

  it('fails only its own claim; the honest claimants of the group get their jobs', async () => {
    const q = 'gc-poison-claim';
    await api(app).enqueueBatch(
      q,
      Array.from({ length: 30 }, (_, i) => ({ payload: i })),
    );
    const groups = new ClaimGroups(database.db, 30_000);
    const answers = await Promise.allSettled(
      Array.from({ length: 16 }, (_, i) =>
        groups.claim({ queue: q, maxJobs: 2, workerId: i === 5 ? 'w\ud800' : `w${i}` }),
      ),
    );
    const rejected = answers.flatMap((a, i) => (a.status === 'rejected' ? [i] : []));
    expect(rejected).toEqual([5]);
    expect((answers[5] as PromiseRejectedResult).reason).toEqual(inputError);
    const ids = answers.flatMap((a) => (a.status === 'fulfilled' ? a.value.jobs.map((j) => j.id) : []));
    expect(ids).toHaveLength(30);
    expect(new Set(ids).size).toBe(30);
  });

  it('fails only its own enqueue; the honest enqueues of the group are stored', async () => {
    const q = 'gc-poison-enqueue';
    const groups = new EnqueueGroups(database.db, {
      autoCreate: { enabled: true, maxQueues: 1000 },
      defaultMaxAttempts: 5,
      idempotencyRetentionMs: 60_000,
    });
    const item = (i: number) => ({ payloadJson: String(i), priority: 0 });
    const answers = await Promise.allSettled([
      groups.enqueue(q, [item(0)]),
      ...Array.from({ length: 20 }, (_, i) =>
        groups.enqueue(q, i === 7 ? [{ ...item(100), runAt: '2030-01-01T00:00:00+23:00' }] : [item(i + 1)]),
      ),
    ]);
    expect(answers.flatMap((a, i) => (a.status === 'rejected' ? [i] : []))).toEqual([8]);
    const stored = await sql<{ n: number }>`
      SELECT count(*)::int AS n FROM baton.jobs WHERE queue = ${q}`.execute(database.db);
    expect(stored.rows[0]!.n).toBe(20);
  });

  it('an outage-like error still fails the whole group, which isolation would not help', async () => {
    let calls = 0;
    const commit = new GroupCommit<number, number>(
      async (items) => {
        calls++;
        await new Promise((r) => setTimeout(r, 10));
        if (items.length > 1) throw Object.assign(new Error('connection reset'), { code: 'ECONNRESET' });
        return items;
      },
      () => 1,
      10,
      (err) => (err as { code?: string }).code?.startsWith('22') ?? false,
    );
    const results = await Promise.allSettled([1, 2, 3].map((n) => commit.submit(n)));
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'rejected']);
    expect(calls).toBe(2);
  });
});
