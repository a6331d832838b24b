import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BatonApp } from '../../src/app.js';
import { sha256 } from '../../src/auth/api-keys.js';
import { createTestApp, useTestApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { api, enqueueAndClaim, enqueueAndClaimMany } from '../support/http.js';

/**
 * Ack-and-claim: `next` on ack, nack and the batch ack claims the next jobs of the acked job's queue
 * in the same request, through the claim route's own path. The ack is committed whatever the claim
 * part does.
 */
const database = useTestDatabase();
const app = useTestApp(database);

const UNKNOWN_TOKEN = '00000000-0000-4000-8000-000000000000';

type Claimed = { id: string; queue: string; lease_token: string; attempt: number; lease_expires_at: string };

async function stateOf(id: string): Promise<string> {
  return (await api(app).get(id)).body.state;
}

/** The jobs currently claimed in the database, by id: their lease tokens. */
async function liveLeases(queue: string) {
  return database.db
    .selectFrom('baton.jobs')
    .select(['id', 'lease_token'])
    .where('queue', '=', queue)
    .where('state', '=', 'claimed')
    .execute();
}

describe('ack with next', () => {
  it('completes the job and answers the next jobs of the same queue under fresh leases', async () => {
    const q = 'ac-basic';
    const first = await enqueueAndClaim(app, q, { payload: 'first' });
    await api(app).enqueueBatch(q, [{ payload: 'a' }, { payload: 'b' }, { payload: 'c' }]);
    await api(app).enqueue('ac-basic-other', { payload: 'elsewhere' });

    const res = await api(app).ack(first.id, {
      lease_token: first.lease_token,
      result: { ok: true },
      next: { max_jobs: 2, lease_ms: 45_000, worker_id: 'w-1' },
    });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ id: first.id, state: 'completed', result: { ok: true } });
    const next = res.body.next as (Claimed & { payload: unknown })[];
    expect(next.map((j) => j.payload)).toEqual(['a', 'b']);
    for (const job of next) {
      expect(job.queue).toBe(q);
      expect(job.attempt).toBe(1);
      expect(job.lease_token).not.toBe(first.lease_token);
      const got = (await api(app).get(job.id)).body;
      expect(got).toMatchObject({ state: 'claimed', worker_id: 'w-1' });
      // The lease is the one asked for (45 s), not the queue's default.
      const leftMs = Date.parse(job.lease_expires_at) - Date.now();
      expect(leftMs).toBeGreaterThan(30_000);
      expect(leftMs).toBeLessThanOrEqual(45_000);
    }
    // The leases are live: they renew and ack like any claim's.
    expect((await api(app).renew(next[0]!.id, { lease_token: next[0]!.lease_token })).status).toBe(200);
    expect((await api(app).ack(next[1]!.id, { lease_token: next[1]!.lease_token })).status).toBe(200);
    // The other queue's job was not touched.
    expect((await api(app).claim('ac-basic-other')).body.jobs).toHaveLength(1);
  });

  it('answers without next when the request did not ask for it', async () => {
    const job = await enqueueAndClaim(app, 'ac-plain');
    await api(app).enqueue('ac-plain', { payload: 2 });
    const res = await api(app).ack(job.id, { lease_token: job.lease_token });
    expect(res.status).toBe(200);
    expect(res.body).not.toHaveProperty('next');
    expect((await api(app).claim('ac-plain')).body.jobs).toHaveLength(1);
  });

  it('next: {} takes the claim defaults: one job', async () => {
    const q = 'ac-defaults';
    const job = await enqueueAndClaim(app, q);
    await api(app).enqueueBatch(q, [{ payload: 1 }, { payload: 2 }]);
    const res = await api(app).ack(job.id, { lease_token: job.lease_token, next: {} });
    expect(res.body.next).toHaveLength(1);
  });

  it('is committed even when next claims nothing: next is [] and the job is completed', async () => {
    const job = await enqueueAndClaim(app, 'ac-empty');
    const res = await api(app).ack(job.id, { lease_token: job.lease_token, next: { max_jobs: 5 } });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ id: job.id, state: 'completed', next: [] });
    expect(await stateOf(job.id)).toBe('completed');
  });

  it('is committed when the claim part fails: 200, the completed job, next []', async () => {
    const q = 'ac-claim-fails';
    const job = await enqueueAndClaim(app, q);
    await api(app).enqueue(q, { payload: 'never claimed' });
    // A real failure inside PostgreSQL: any claim of this queue raises.
    await sql
      .raw(`
        CREATE FUNCTION baton.ac_refuse_claim() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN RAISE EXCEPTION 'claims of % refused by the test', NEW.queue; END $$;
        CREATE TRIGGER ac_refuse_claim BEFORE UPDATE ON baton.jobs FOR EACH ROW
          WHEN (NEW.state = 'claimed' AND NEW.queue = '${q}') EXECUTE FUNCTION baton.ac_refuse_claim();`)
      .execute(database.db);
    try {
      expect((await api(app).claim(q)).status).toBe(500);
      const res = await api(app).ack(job.id, { lease_token: job.lease_token, next: { max_jobs: 1 } });
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ id: job.id, state: 'completed', next: [] });
      expect(await stateOf(job.id)).toBe('completed');
    } finally {
      await sql
        .raw('DROP TRIGGER ac_refuse_claim ON baton.jobs; DROP FUNCTION baton.ac_refuse_claim();')
        .execute(database.db);
    }
    expect((await api(app).claim(q)).body.jobs).toHaveLength(1);
  });

  it('with a lost lease is 409 and claims nothing', async () => {
    const q = 'ac-stale';
    const job = await enqueueAndClaim(app, q);
    const waiting = await api(app).enqueue(q, { payload: 'stays ready' });
    const res = await api(app).ack(job.id, { lease_token: UNKNOWN_TOKEN, next: { max_jobs: 5 } });
    expect(res.status).toBe(409);
    expect(res.body.code).toBe('lease_lost');
    expect(await stateOf(job.id)).toBe('claimed');
    expect(await stateOf(waiting.body.id)).toBe('ready');
  });

  it('refuses a bad next with 400 naming the field, before anything is acked', async () => {
    const job = await enqueueAndClaim(app, 'ac-invalid');
    for (const [next, field] of [
      [{ max_jobs: 0 }, 'next.max_jobs'],
      [{ lease_ms: 1 }, 'next.lease_ms'],
      [{ wait_ms: 20_001 }, 'next.wait_ms'],
      [{ queue: 'other' }, 'next.queue'],
    ] as const) {
      const res = await api(app).ack(job.id, { lease_token: job.lease_token, next });
      expect(res.status, JSON.stringify(next)).toBe(400);
      expect(JSON.stringify(res.body)).toContain(field);
    }
    expect(await stateOf(job.id)).toBe('claimed');
  });

  it('hands out nothing from a paused queue, and the ack stands', async () => {
    const q = 'ac-paused';
    const job = await enqueueAndClaim(app, q);
    await api(app).enqueue(q, { payload: 2 });
    expect((await api(app).call('POST', `/v1/queues/${q}/pause`)).status).toBe(200);
    const res = await api(app).ack(job.id, { lease_token: job.lease_token, next: { max_jobs: 1 } });
    expect(res.body).toMatchObject({ state: 'completed', next: [] });
  });
});

describe('long-poll in next', () => {
  it('waits for a job that arrives during wait_ms and answers it', async () => {
    const q = 'ac-wait';
    const job = await enqueueAndClaim(app, q);
    const acking = api(app).ack(job.id, { lease_token: job.lease_token, next: { wait_ms: 10_000 } });
    await new Promise((r) => setTimeout(r, 300));
    // The ack committed before the wait began.
    expect(await stateOf(job.id)).toBe('completed');
    const enq = await api(app).enqueue(q, { payload: 'late' });
    const res = await acking;
    expect(res.status).toBe(200);
    expect(res.body.state).toBe('completed');
    expect(res.body.next.map((j: Claimed) => j.id)).toEqual([enq.body.id]);
  });

  it('answers next [] once wait_ms runs out with nothing', async () => {
    const job = await enqueueAndClaim(app, 'ac-wait-empty');
    const res = await api(app).ack(job.id, { lease_token: job.lease_token, next: { wait_ms: 300 } });
    expect(res.body).toMatchObject({ state: 'completed', next: [] });
  });
});

describe('nack with next', () => {
  it('records the failure and answers the next jobs of the queue', async () => {
    const q = 'ac-nack';
    const job = await enqueueAndClaim(app, q);
    const other = await api(app).enqueue(q, { payload: 'next one' });
    const res = await api(app).nack(job.id, {
      lease_token: job.lease_token,
      error: { message: 'boom' },
      retry_in_ms: 60_000,
      next: { max_jobs: 5 },
    });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ id: job.id, state: 'scheduled', last_error: { message: 'boom' } });
    expect(res.body.next.map((j: Claimed) => j.id)).toEqual([other.body.id]);
  });

  it('a job nacked with no delay is ready again and may come straight back', async () => {
    const job = await enqueueAndClaim(app, 'ac-nack-now');
    const res = await api(app).nack(job.id, { lease_token: job.lease_token, retry_in_ms: 0, next: {} });
    expect(res.body.next).toHaveLength(1);
    expect(res.body.next[0]).toMatchObject({ id: job.id, attempt: 2 });
    expect(res.body.next[0].lease_token).not.toBe(job.lease_token);
  });

  it('with a lost lease is 409 and claims nothing', async () => {
    const q = 'ac-nack-stale';
    const job = await enqueueAndClaim(app, q);
    const waiting = await api(app).enqueue(q, { payload: 1 });
    const res = await api(app).nack(job.id, { lease_token: UNKNOWN_TOKEN, next: {} });
    expect(res.status).toBe(409);
    expect(await stateOf(waiting.body.id)).toBe('ready');
  });
});

describe('batch ack with next', () => {
  it('acks the batch and answers the next jobs of its queue', async () => {
    const q = 'ac-batch';
    const jobs = await enqueueAndClaimMany(app, q, 3);
    await api(app).enqueueBatch(q, [{ payload: 'x' }, { payload: 'y' }]);
    const res = await api(app).call('POST', '/v1/jobs/ack', {
      acks: jobs.map((j) => ({ id: j.id, lease_token: j.lease_token })),
      next: { max_jobs: 10 },
    });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ acked: 3, failed: 0 });
    expect(res.body.next.map((j: { payload: unknown }) => j.payload)).toEqual(['x', 'y']);
    for (const j of jobs) expect(await stateOf(j.id)).toBe('completed');
  });

  it('answers without next when not asked', async () => {
    const [job] = await enqueueAndClaimMany(app, 'ac-batch-plain', 1);
    const res = await api(app).ackBatch([{ id: job.id, lease_token: job.lease_token }]);
    expect(res.body).not.toHaveProperty('next');
  });

  it('refuses acks of several queues with 400 naming the item, and acks nothing', async () => {
    const [a] = await enqueueAndClaimMany(app, 'ac-batch-q1', 1);
    const [b] = await enqueueAndClaimMany(app, 'ac-batch-q2', 1);
    const res = await api(app).call('POST', '/v1/jobs/ack', {
      acks: [
        { id: a.id, lease_token: a.lease_token },
        { id: '99999999', lease_token: UNKNOWN_TOKEN },
        { id: b.id, lease_token: b.lease_token },
      ],
      next: {},
    });
    expect(res.status).toBe(400);
    expect(JSON.stringify(res.body)).toContain('acks[2].id');
    expect(await stateOf(a.id)).toBe('claimed');
    expect(await stateOf(b.id)).toBe('claimed');
  });

  it('claims nothing when an item lost its lease, but acks the others', async () => {
    const q = 'ac-batch-stale';
    const [a, b] = await enqueueAndClaimMany(app, q, 2);
    const waiting = await api(app).enqueue(q, { payload: 1 });
    const res = await api(app).call('POST', '/v1/jobs/ack', {
      acks: [
        { id: a.id, lease_token: a.lease_token },
        { id: b.id, lease_token: UNKNOWN_TOKEN },
      ],
      next: { max_jobs: 5 },
    });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ acked: 1, failed: 1, next: [] });
    expect(await stateOf(a.id)).toBe('completed');
    // Not claimed, or given back with the attempt not counted.
    expect((await api(app).get(waiting.body.id)).body).toMatchObject({ state: 'ready', attempts: 0 });
  });

  it('claims nothing when no item exists', async () => {
    const res = await api(app).call('POST', '/v1/jobs/ack', {
      acks: [{ id: '99999998', lease_token: UNKNOWN_TOKEN }],
      next: {},
    });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ acked: 0, failed: 1, next: [] });
  });
});

describe('flow control', () => {
  it('a concurrency_limit 1 queue: the ack frees the slot and next gets the next job', async () => {
    const q = 'ac-limit';
    await api(app).call('PUT', `/v1/queues/${q}`, { concurrency_limit: 1 });
    await api(app).enqueueBatch(q, [{ payload: 1 }, { payload: 2 }, { payload: 3 }]);
    let [held] = (await api(app).claim(q, { max_jobs: 3 })).body.jobs as Claimed[];
    expect(held).toBeDefined();
    // The limit holds: nothing more while one is claimed.
    expect((await api(app).claim(q)).body.jobs).toEqual([]);
    for (let i = 0; i < 2; i++) {
      const res = await api(app).ack(held!.id, { lease_token: held!.lease_token, next: { max_jobs: 3 } });
      expect(res.body.state).toBe('completed');
      // The limit still holds within next: one job, never more.
      expect(res.body.next).toHaveLength(1);
      [held] = res.body.next;
      expect(await liveLeases(q)).toHaveLength(1);
    }
    const last = await api(app).ack(held!.id, { lease_token: held!.lease_token, next: { max_jobs: 3 } });
    expect(last.body.next).toEqual([]);
  });

  it('a next held back by the limit long-polls until another ack frees the slot', async () => {
    const q = 'ac-limit-wait';
    await api(app).enqueueBatch(q, [{ payload: 1 }, { payload: 2 }, { payload: 3 }]);
    const [a, b] = (await api(app).claim(q, { max_jobs: 2 })).body.jobs as Claimed[];
    // Two claimed, then a limit of one: acking b leaves a holding the only slot.
    await api(app).call('PUT', `/v1/queues/${q}`, { concurrency_limit: 1 });
    const acking = api(app).ack(b!.id, { lease_token: b!.lease_token, next: { wait_ms: 10_000 } });
    await new Promise((r) => setTimeout(r, 300));
    expect(await stateOf(b!.id)).toBe('completed');
    expect(await liveLeases(q)).toHaveLength(1);
    await api(app).ack(a!.id, { lease_token: a!.lease_token });
    const res = await acking;
    expect(res.body.next).toHaveLength(1);
    expect(await liveLeases(q)).toHaveLength(1);
  });
});

describe('scopes', () => {
  const SECRETS = { producer: 'p-secret', consumer: 'c-secret', limited: 'l-secret' } as const;
  const KEYS = JSON.stringify([
    { name: 'p', sha256: sha256(SECRETS.producer).toString('hex'), scopes: ['producer'] },
    { name: 'c', sha256: sha256(SECRETS.consumer).toString('hex'), scopes: ['consumer'] },
    {
      name: 'l',
      sha256: sha256(SECRETS.limited).toString('hex'),
      scopes: ['consumer'],
      queues: ['mine.*'],
    },
  ]);
  let keyed: BatonApp;
  beforeAll(async () => {
    keyed = await createTestApp(database, { BATON_API_KEYS: KEYS });
  });
  afterAll(async () => {
    await keyed?.close();
  });

  const as = async (who: keyof typeof SECRETS, url: string, payload: object) => {
    const res = await keyed.inject({
      method: 'POST',
      url,
      headers: { authorization: `Bearer ${SECRETS[who]}` },
      payload,
    });
    return { status: res.statusCode, body: res.json() };
  };

  it('a key that may not ack is refused before anything happens', async () => {
    const job = await enqueueAndClaim(app, 'mine.scoped');
    await api(app).enqueue('mine.scoped', { payload: 2 });
    const res = await as('producer', `/v1/jobs/${job.id}/ack`, { lease_token: job.lease_token, next: {} });
    expect(res.status).toBe(403);
    expect(await stateOf(job.id)).toBe('claimed');
    expect(await liveLeases('mine.scoped')).toHaveLength(1);
  });

  it("a queue-limited key: another queue's job is not found and nothing is acked or claimed", async () => {
    const job = await enqueueAndClaim(app, 'theirs.scoped');
    await api(app).enqueue('theirs.scoped', { payload: 2 });
    const res = await as('limited', `/v1/jobs/${job.id}/ack`, { lease_token: job.lease_token, next: {} });
    expect(res.status).toBe(404);
    expect(await stateOf(job.id)).toBe('claimed');
    expect(await liveLeases('theirs.scoped')).toHaveLength(1);
  });

  it('a queue-limited key acks and claims in its own queue; in a batch, unseen items do not count', async () => {
    const q = 'mine.limited';
    const job = await enqueueAndClaim(app, q);
    await api(app).enqueueBatch(q, [{ payload: 1 }, { payload: 2 }]);
    const res = await as('limited', `/v1/jobs/${job.id}/ack`, { lease_token: job.lease_token, next: {} });
    expect(res.status).toBe(200);
    expect(res.body.next).toHaveLength(1);
    // A batch with a job of a queue the key may not see: that item is not_found, not a second queue.
    const theirs = await enqueueAndClaim(app, 'theirs.batch');
    const mine = res.body.next[0] as Claimed;
    const batch = await as('limited', '/v1/jobs/ack', {
      acks: [
        { id: mine.id, lease_token: mine.lease_token },
        { id: theirs.id, lease_token: theirs.lease_token },
      ],
      next: {},
    });
    expect(batch.status).toBe(200);
    expect(batch.body.results.map((r: { outcome: string }) => r.outcome)).toEqual(['acked', 'not_found']);
    expect(batch.body.next).toHaveLength(1);
    expect(await stateOf(theirs.id)).toBe('claimed');
  });

  it('a consumer key acks and claims', async () => {
    const job = await enqueueAndClaim(app, 'c.scoped');
    await api(app).enqueue('c.scoped', { payload: 2 });
    const res = await as('consumer', `/v1/jobs/${job.id}/ack`, { lease_token: job.lease_token, next: {} });
    expect(res.status).toBe(200);
    expect(res.body.next).toHaveLength(1);
  });
});

describe('concurrent ack-and-claim workers', () => {
  it('16 workers over 500 jobs: every job done exactly once, never two live leases on a job', async () => {
    const q = 'ac-many';
    const total = 500;
    for (let i = 0; i < total; i += 250) {
      await api(app).enqueueBatch(
        q,
        Array.from({ length: 250 }, (_, k) => ({ payload: i + k })),
      );
    }
    const held = new Map<string, number>(); // job id → worker holding it now
    const doneBy = new Map<string, number[]>(); // job id → workers that acked it
    const violations: string[] = [];
    let completed = 0;

    const take = (worker: number, jobs: Claimed[]) => {
      for (const job of jobs) {
        const other = held.get(job.id);
        if (other !== undefined) violations.push(`job ${job.id} held by ${other} and ${worker}`);
        held.set(job.id, worker);
      }
    };

    const worker = async (w: number) => {
      let hand: Claimed[] = (await api(app).claim(q, { max_jobs: 1, lease_ms: 60_000 })).body.jobs;
      take(w, hand);
      while (hand.length > 0 || completed < total) {
        if (hand.length === 0) {
          hand = (await api(app).claim(q, { max_jobs: 1, lease_ms: 60_000, wait_ms: 200 })).body.jobs;
          take(w, hand);
          continue;
        }
        const job = hand[0]!;
        // Done: it leaves the worker's hand before the ack, as a real worker's work has happened.
        held.delete(job.id);
        const res = await api(app).ack(job.id, {
          lease_token: job.lease_token,
          result: w,
          next: { max_jobs: 1, lease_ms: 60_000, wait_ms: 100 },
        });
        if (res.status !== 200) {
          violations.push(`ack of ${job.id} by ${w}: ${res.status} ${JSON.stringify(res.body)}`);
          hand = [];
          continue;
        }
        doneBy.set(job.id, [...(doneBy.get(job.id) ?? []), w]);
        completed++;
        hand = res.body.next;
        take(w, hand);
      }
    };
    await Promise.all(Array.from({ length: 16 }, (_, w) => worker(w)));

    expect(violations).toEqual([]);
    expect(doneBy.size).toBe(total);
    expect([...doneBy.values()].every((ws) => ws.length === 1)).toBe(true);
    const { rows } = await sql<{ n: string; once: string }>`
      SELECT count(*) AS n, count(*) FILTER (WHERE attempts = 1) AS once
      FROM baton.job_history WHERE queue = ${q} AND state = 'completed'`.execute(database.db);
    expect(rows[0]).toEqual({ n: String(total), once: String(total) });
    expect(await liveLeases(q)).toEqual([]);
    // More than one worker did the work.
    expect(new Set([...doneBy.values()].flat()).size).toBeGreaterThan(1);
  });
});
