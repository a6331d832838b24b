import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { claimJobs } from '../../src/jobs/claim/claim.js';
import { enqueueJobs } from '../../src/jobs/enqueue/enqueue.js';
import { useTestApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { api } from '../support/http.js';

const database = useTestDatabase();
const app = useTestApp(database);

const opts = {
  autoCreate: { enabled: true, maxQueues: 1000 },
  defaultMaxAttempts: 5,
  idempotencyRetentionMs: 60_000,
};

/** The waiting jobs (ready or scheduled) of a queue carrying a key. */
async function waiting(queue: string, key: string) {
  const { rows } = await sql<{ id: string; payload: unknown; state: string; priority: number }>`
    SELECT id::text, payload, state, priority FROM baton.jobs WHERE queue = ${queue} AND unique_key = ${key} AND state = 'ready'
    UNION ALL
    SELECT id::text, payload, 'scheduled', priority FROM baton.scheduled_jobs WHERE queue = ${queue} AND unique_key = ${key}`.execute(
    database.db,
  );
  return rows;
}

describe('unique jobs: unique_key', () => {
  it('keep (the default): a second enqueue answers the waiting job with 200 and changes nothing', async () => {
    const client = api(app);
    const first = await client.enqueue('uq-keep', { payload: { v: 1 }, unique_key: 'user-1' });
    expect(first.status).toBe(201);
    expect(first.body.unique_key).toBe('user-1');
    const second = await client.enqueue('uq-keep', { payload: { v: 2 }, priority: 9, unique_key: 'user-1' });
    expect(second.status).toBe(200);
    expect(second.body.id).toBe(first.body.id);
    expect((await client.get(first.body.id)).body).toMatchObject({ payload: { v: 1 }, priority: 0 });
    // Another key, or another queue, is another job.
    expect((await client.enqueue('uq-keep', { payload: {}, unique_key: 'user-2' })).status).toBe(201);
    expect((await client.enqueue('uq-keep-2', { payload: {}, unique_key: 'user-1' })).status).toBe(201);
  });

  it('replace: the waiting job takes the new payload, priority and run_at (debounce)', async () => {
    const client = api(app);
    const first = await client.enqueue('uq-replace', {
      payload: { v: 1 },
      unique_key: 'doc-7',
      max_attempts: 7,
    });
    expect(first.body.state).toBe('ready');
    const later = await client.enqueue('uq-replace', {
      payload: { v: 2 },
      priority: 3,
      delay_ms: 30_000,
      unique_key: 'doc-7',
      on_conflict: 'replace',
    });
    expect(later.status).toBe(200);
    expect(later.body).toMatchObject({ id: first.body.id, state: 'scheduled', priority: 3, max_attempts: 7 });
    expect((await client.get(first.body.id)).body).toMatchObject({ payload: { v: 2 }, state: 'scheduled' });
    expect(ms(later.body.run_at) - Date.now()).toBeGreaterThan(20_000);
    // Due now again: back in the ring, claimable with the latest data.
    const now = await client.enqueue('uq-replace', {
      payload: { v: 3 },
      unique_key: 'doc-7',
      on_conflict: 'replace',
    });
    expect(now.body).toMatchObject({ id: first.body.id, state: 'ready', priority: 0 });
    const claimed = (await client.claim('uq-replace')).body.jobs;
    expect(claimed).toHaveLength(1);
    expect(claimed[0]).toMatchObject({ id: first.body.id, payload: { v: 3 } });
    expect(await waiting('uq-replace', 'doc-7')).toEqual([]);
  });

  it('the key is free again once its job is claimed (a change during processing schedules one more run)', async () => {
    const client = api(app);
    const first = await client.enqueue('uq-free', { payload: 1, unique_key: 'k' });
    await client.claim('uq-free');
    const second = await client.enqueue('uq-free', { payload: 2, unique_key: 'k' });
    expect(second.status).toBe(201);
    expect(second.body.id).not.toBe(first.body.id);
    expect((await client.enqueue('uq-free', { payload: 3, unique_key: 'k' })).body.id).toBe(second.body.id);
    // A cancelled waiting job frees the key too.
    await client.cancel(second.body.id);
    const third = await client.enqueue('uq-free', { payload: 4, unique_key: 'k' });
    expect(third.status).toBe(201);
    // A retry of a claimed job (nack with a delay) holds the key again: it waits
    // (test/jobs/unique-return.test.ts has every path that brings a job back).
    const [claimed] = (await client.claim('uq-free')).body.jobs;
    expect(claimed.id).toBe(third.body.id);
    await client.nack(claimed.id, { lease_token: claimed.lease_token, retry_in_ms: 60_000 });
    const fifth = await client.enqueue('uq-free', { payload: 5, unique_key: 'k' });
    expect(fifth.status).toBe(200);
    expect(fifth.body.id).toBe(third.body.id);
    expect((await waiting('uq-free', 'k')).map((j) => j.id)).toEqual([third.body.id]);
  });

  it('50 concurrent enqueues with one key leave exactly one waiting job', async () => {
    const client = api(app);
    const answers = await Promise.all(
      Array.from({ length: 50 }, (_, i) => client.enqueue('uq-race', { payload: { i }, unique_key: 'one' })),
    );
    expect(answers.filter((a) => a.status === 201)).toHaveLength(1);
    expect(answers.filter((a) => a.status === 200)).toHaveLength(49);
    expect(new Set(answers.map((a) => a.body.id)).size).toBe(1);
    expect(await waiting('uq-race', 'one')).toHaveLength(1);
  });

  for (const onConflict of ['keep', 'replace'] as const) {
    it(`50 concurrent enqueues across connections (no group commit, ${onConflict}) leave one waiting job`, async () => {
      const queue = `uq-race-db-${onConflict}`;
      const answers = await Promise.all(
        Array.from({ length: 50 }, (_, i) =>
          enqueueJobs(
            database.db,
            queue,
            [{ payloadJson: JSON.stringify({ i }), priority: 0, uniqueKey: 'one', onConflict }],
            opts,
          ),
        ),
      );
      expect(answers.filter(([a]) => a!.created)).toHaveLength(1);
      expect(new Set(answers.map(([a]) => a!.job.id)).size).toBe(1);
      const left = await waiting(queue, 'one');
      expect(left).toHaveLength(1);
      expect((left[0]!.payload as { i: number }).i).toBeGreaterThanOrEqual(0);
    });
  }

  it('a stale key (its job claimed, cancelled or gone) is taken over by the next enqueue, racing or not', async () => {
    const queue = 'uq-stale-race';
    const first = await enqueueJobs(
      database.db,
      queue,
      [{ payloadJson: '1', priority: 0, uniqueKey: 's' }],
      opts,
    );
    await claimJobs(database.db, { queue, maxJobs: 1, defaultLeaseMs: 60_000 });
    const answers = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        enqueueJobs(database.db, queue, [{ payloadJson: String(i), priority: 0, uniqueKey: 's' }], opts),
      ),
    );
    expect(answers.filter(([a]) => a!.created)).toHaveLength(1);
    const ids = new Set(answers.map(([a]) => a!.job.id));
    expect(ids.size).toBe(1);
    expect(ids.has(first[0]!.job.id)).toBe(false);
    expect(await waiting(queue, 's')).toHaveLength(1);
  });

  for (const onConflict of ['keep', 'replace'] as const) {
    it(`claims racing enqueues (${onConflict}): never two waiting jobs, each job claimed at most once`, async () => {
      const queue = `uq-claim-race-${onConflict}`;
      const claimed = new Set<string>();
      let stop = false;
      const claimer = (async () => {
        while (!stop) {
          for (const job of await claimJobs(database.db, { queue, maxJobs: 5, defaultLeaseMs: 60_000 })) {
            expect(claimed.has(job.id)).toBe(false);
            claimed.add(job.id);
          }
        }
      })();
      const producers = Array.from({ length: 4 }, async (_, p) => {
        for (let i = 0; i < 40; i++) {
          await enqueueJobs(
            database.db,
            queue,
            [{ payloadJson: JSON.stringify({ p, i }), priority: 0, uniqueKey: 'hot', onConflict }],
            opts,
          );
          expect((await waiting(queue, 'hot')).length).toBeLessThanOrEqual(1);
        }
      });
      try {
        await Promise.all(producers);
      } finally {
        stop = true;
        await claimer;
      }
      expect((await waiting(queue, 'hot')).length).toBeLessThanOrEqual(1);
      expect(claimed.size).toBeGreaterThan(0);
    });
  }

  it("in one batch: a repeated key answers the first item's job; replace items give it their data", async () => {
    const client = api(app);
    const batch = await client.enqueueBatch('uq-batch', [
      { payload: 'a', unique_key: 'x' },
      { payload: 'plain' },
      { payload: 'b', unique_key: 'x', on_conflict: 'replace', priority: 5 },
      { payload: 'c', unique_key: 'x' },
    ]);
    expect(batch.status).toBe(201);
    const jobs = batch.body.jobs;
    expect(jobs.map((j: { created: boolean }) => j.created)).toEqual([true, true, false, false]);
    expect(jobs[2].id).toBe(jobs[0].id);
    expect(jobs[3].id).toBe(jobs[0].id);
    expect((await client.get(jobs[0].id)).body).toMatchObject({ payload: 'b', priority: 5 });
    // Ids still follow request order: the plain job after the keyed one.
    expect(BigInt(jobs[1].id)).toBeGreaterThan(BigInt(jobs[0].id));
  });

  it('a unique-key enqueue grouped with plain concurrent enqueues does not disturb them', async () => {
    const client = api(app);
    const answers = await Promise.all([
      ...Array.from({ length: 20 }, (_, i) => client.enqueue('uq-group', { payload: i })),
      client.enqueue('uq-group', { payload: 'keyed', unique_key: 'g' }),
      client.enqueue('uq-group', { payload: 'keyed again', unique_key: 'g' }),
    ]);
    expect(answers.slice(0, 20).every((a) => a.status === 201)).toBe(true);
    expect(
      answers
        .slice(20)
        .map((a) => a.status)
        .sort(),
    ).toEqual([200, 201]);
    const { rows } = await sql<{
      n: number;
    }>`SELECT count(*)::int AS n FROM baton.jobs WHERE queue = 'uq-group'`.execute(database.db);
    expect(rows[0]!.n).toBe(21);
  });

  it('with an idempotency key too: a request that answered a waiting job answers it again when repeated', async () => {
    const client = api(app);
    const first = await client.enqueue('uq-idem', { payload: 1, unique_key: 'u' });
    const other = await client.enqueue('uq-idem', { payload: 2, unique_key: 'u', idempotency_key: 'req-1' });
    expect(other.status).toBe(200);
    expect(other.body.id).toBe(first.body.id);
    await client.claim('uq-idem');
    const again = await client.enqueue('uq-idem', { payload: 2, unique_key: 'u', idempotency_key: 'req-1' });
    expect(again.status).toBe(200);
    expect(again.body.id).toBe(first.body.id);
  });

  it('on_conflict without unique_key is a 400 naming it', async () => {
    const bad = await api(app).enqueue('uq-bad', { payload: 1, on_conflict: 'replace' });
    expect(bad.status).toBe(400);
    expect(bad.body.errors[0].field).toBe('on_conflict');
  });
});

const ms = (iso: string) => new Date(iso).getTime();
