import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { releaseClaims } from '../../src/jobs/claim/release.js';
import { enqueueJobs } from '../../src/jobs/enqueue/enqueue.js';
import { settleReturnedKeys } from '../../src/jobs/unique-return.js';
import { rearmExpiredLeases } from '../../src/maintenance/rearm.js';
import { useTestApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { api } from '../support/http.js';

const database = useTestDatabase();
const app = useTestApp(database);

/** The waiting jobs (ready or scheduled) of a queue carrying a key, and the job its key row names. */
async function waiting(queue: string, key: string) {
  const { rows } = await sql<{ id: string }>`
    SELECT id::text FROM baton.jobs WHERE queue = ${queue} AND unique_key = ${key} AND state = 'ready'
    UNION ALL
    SELECT id::text FROM baton.scheduled_jobs WHERE queue = ${queue} AND unique_key = ${key}`.execute(
    database.db,
  );
  return rows.map((r) => r.id).sort();
}
async function holder(queue: string, key: string) {
  const { rows } = await sql<{ job_id: string }>`
    SELECT job_id::text FROM baton.unique_keys WHERE queue = ${queue} AND key = ${key}`.execute(database.db);
  return rows[0]?.job_id;
}

/** Enqueue with a key and claim it; returns the claimed job. */
async function claimedWithKey(queue: string, key: string, payload: unknown = {}) {
  const client = api(app);
  const enq = await client.enqueue(queue, { payload, unique_key: key, max_attempts: 5 });
  expect(enq.status).toBe(201);
  const [job] = (await client.claim(queue)).body.jobs;
  expect(job.id).toBe(enq.body.id);
  return job as { id: string; lease_token: string };
}

/** The job gave way to `standing`: cancelled, saying why and naming the job that stands. */
async function expectGaveWay(id: string, standing: string, key: string) {
  const job = (await api(app).get(id)).body;
  expect(job.state).toBe('cancelled');
  expect(job.last_error).toMatchObject({ reason: 'superseded', superseded_by: standing });
  expect(job.last_error.message).toContain(`job ${standing}`);
  expect(job.last_error.message).toContain(key);
}

describe('a job that comes back to waiting keeps "at most one waiting job per unique key"', () => {
  for (const retryInMs of [0, 60_000]) {
    it(`a retry (nack, retry_in_ms ${retryInMs}) with no newer job takes its key back`, async () => {
      const q = `ur-retry-${retryInMs}`;
      const client = api(app);
      const job = await claimedWithKey(q, 'k');
      const nack = await client.nack(job.id, { lease_token: job.lease_token, retry_in_ms: retryInMs });
      expect(nack.body.state).toBe(retryInMs === 0 ? 'ready' : 'scheduled');
      expect(await holder(q, 'k')).toBe(job.id);
      // keep: the retry stands for the new enqueue.
      const again = await client.enqueue(q, { payload: { v: 2 }, unique_key: 'k' });
      expect(again.status).toBe(200);
      expect(again.body.id).toBe(job.id);
      // replace: the retry takes the new payload.
      const replaced = await client.enqueue(q, {
        payload: { v: 3 },
        unique_key: 'k',
        on_conflict: 'replace',
      });
      expect(replaced.body.id).toBe(job.id);
      expect((await client.get(job.id)).body).toMatchObject({ payload: { v: 3 }, attempts: 1 });
      expect(await waiting(q, 'k')).toEqual([job.id]);
    });

    it(`a retry (nack, retry_in_ms ${retryInMs}) gives way to a newer job holding its key`, async () => {
      const q = `ur-yield-${retryInMs}`;
      const client = api(app);
      const job = await claimedWithKey(q, 'k1', { v: 1 });
      const newer = await client.enqueue(q, { payload: { v: 2 }, unique_key: 'k1' });
      expect(newer.status).toBe(201);
      const nack = await client.nack(job.id, { lease_token: job.lease_token, retry_in_ms: retryInMs });
      expect(nack.status).toBe(200);
      expect(nack.body.state).toBe('cancelled');
      await expectGaveWay(job.id, newer.body.id, 'k1');
      expect(await waiting(q, 'k1')).toEqual([newer.body.id]);
      expect(await holder(q, 'k1')).toBe(newer.body.id);
    });
  }

  it('a re-armed job (its lease expired) takes its key back, or gives way', async () => {
    const client = api(app);
    const alone = await claimedWithKey('ur-rearm', 'a');
    const yielding = await claimedWithKey('ur-rearm', 'b');
    const newer = await client.enqueue('ur-rearm', { payload: {}, unique_key: 'b' });
    await sql`UPDATE baton.jobs SET lease_expires_at = now() - interval '1 second'
              WHERE id IN (${alone.id}, ${yielding.id})`.execute(database.db);
    const result = await rearmExpiredLeases(database.db, 100);
    expect(result.total).toBe(2);
    expect(result.ready.get('ur-rearm')).toBe(1);
    expect((await client.get(alone.id)).body.state).toBe('ready');
    expect(await holder('ur-rearm', 'a')).toBe(alone.id);
    await expectGaveWay(yielding.id, newer.body.id, 'b');
    expect(await waiting('ur-rearm', 'b')).toEqual([newer.body.id]);
  });

  it('two jobs of one key re-armed at once: the oldest stands, the other gives way to it', async () => {
    const client = api(app);
    const first = await claimedWithKey('ur-rearm-2', 'k');
    const second = await claimedWithKey('ur-rearm-2', 'k');
    await sql`UPDATE baton.jobs SET lease_expires_at = now() - interval '1 second'
              WHERE id IN (${first.id}, ${second.id})`.execute(database.db);
    await rearmExpiredLeases(database.db, 100);
    expect(await waiting('ur-rearm-2', 'k')).toEqual([first.id]);
    await expectGaveWay(second.id, first.id, 'k');
    expect((await client.enqueue('ur-rearm-2', { payload: {}, unique_key: 'k' })).body.id).toBe(first.id);
  });

  it('a claim handed back (its client went away) gives way to a newer job holding its key', async () => {
    const client = api(app);
    const job = await claimedWithKey('ur-release', 'k');
    const newer = await client.enqueue('ur-release', { payload: {}, unique_key: 'k' });
    expect(await releaseClaims(database.db, [job])).toBe(1);
    await expectGaveWay(job.id, newer.body.id, 'k');
    expect(await waiting('ur-release', 'k')).toEqual([newer.body.id]);
  });

  it('a redriven dead job takes its key back, or gives way to a job holding it', async () => {
    const client = api(app);
    const dead = await claimedWithKey('ur-redrive', 'k');
    await client.nack(dead.id, { lease_token: dead.lease_token, dead: true });
    const newer = await client.enqueue('ur-redrive', { payload: {}, unique_key: 'k' });
    expect(newer.status).toBe(201);
    const redrive = await client.call('POST', '/v1/queues/ur-redrive/redrive', { ids: [dead.id] });
    expect(redrive.body.redriven).toBe(1);
    await expectGaveWay(dead.id, newer.body.id, 'k');
    expect(await waiting('ur-redrive', 'k')).toEqual([newer.body.id]);

    // With nobody holding the key, the redriven job takes it.
    const alone = await claimedWithKey('ur-redrive-solo', 'k');
    await client.nack(alone.id, { lease_token: alone.lease_token, dead: true });
    await client.call('POST', '/v1/queues/ur-redrive-solo/redrive', { ids: [alone.id] });
    expect((await client.get(alone.id)).body.state).toBe('ready');
    expect((await client.enqueue('ur-redrive-solo', { payload: {}, unique_key: 'k' })).body.id).toBe(
      alone.id,
    );
  });

  it('retries and enqueues of one key at the same instant: never two waiting, nothing lost', async () => {
    const client = api(app);
    for (let round = 0; round < 25; round++) {
      const q = `ur-race-${round}`;
      const key = `k${round}`;
      const jobs = [await claimedWithKey(q, key, { round })];
      // A second claimed job of the key (enqueued after the first was claimed), so two returners
      // race the enqueues as well.
      jobs.push(await claimedWithKey(q, key, { round, second: true }));
      const enqueues = Array.from({ length: 4 }, (_, i) =>
        client.enqueue(q, { payload: { i }, unique_key: key, on_conflict: i % 2 ? 'replace' : 'keep' }),
      );
      const nacks = jobs.map((j) =>
        client.nack(j.id, { lease_token: j.lease_token, retry_in_ms: round % 2 ? 0 : 50_000 }),
      );
      const answers = await Promise.all([...enqueues, ...nacks]);
      for (const a of answers) expect(a.status).toBeLessThan(300);
      const left = await waiting(q, key);
      expect(left).toHaveLength(1);
      expect(await holder(q, key)).toBe(left[0]);
      // Every job of the key either waits (the one) or gave way naming the one that waits.
      for (const j of jobs) {
        const got = (await client.get(j.id)).body;
        if (got.id === left[0]) continue;
        expect(got.state).toBe('cancelled');
        expect(got.last_error.superseded_by).toBe(left[0]);
      }
      // Every enqueue was answered with a job that exists.
      for (const a of answers.slice(0, 4)) expect((await client.get(a.body.id)).status).toBe(200);
    }
  }, 60_000);

  it('an enqueue whose snapshot still shows the job claimed does not take the key the job took back', async () => {
    // The enqueue's statement starts while the retry's transaction holds the key row; it waits for
    // it, and then must not judge the key by its snapshot (the job claimed): the generation moved.
    const job = await claimedWithKey('ur-snapshot', 'k');
    let enqueue: Promise<unknown> | undefined;
    await database.db.transaction().execute(async (trx) => {
      await sql`UPDATE baton.jobs SET state = 'ready', lease_token = NULL, lease_ms = NULL,
                  lease_expires_at = NULL, deadline_at = NULL WHERE id = ${job.id}`.execute(trx);
      expect(await settleReturnedKeys(trx, [{ id: job.id, queue: 'ur-snapshot', unique_key: 'k' }])).toEqual(
        [],
      );
      enqueue = enqueueJobs(
        database.db,
        'ur-snapshot',
        [{ payloadJson: '{"v":2}', priority: 0, uniqueKey: 'k', onConflict: 'keep' }],
        {
          autoCreate: { enabled: true, maxQueues: 1000 },
          defaultMaxAttempts: 5,
          idempotencyRetentionMs: 60_000,
        },
      );
      // Long enough for the enqueue's statement to take its snapshot and wait on the key's row.
      await new Promise((r) => setTimeout(r, 300));
    });
    const [answer] = (await enqueue) as { created: boolean; job: { id: string } }[];
    expect(answer).toMatchObject({ created: false, job: { id: job.id } });
    expect(await waiting('ur-snapshot', 'k')).toEqual([job.id]);
  });
});
