import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { createDatabase } from '../../src/db/database.js';
import { claimJobs } from '../../src/jobs/claim.js';
import { enqueueJobs } from '../../src/jobs/enqueue.js';
import { renewLease, renewLeases } from '../../src/jobs/renew.js';
import { rearmExpiredLeases } from '../../src/maintenance/rearm.js';
import { useTestApp } from '../support/app.js';
import { createTestDatabase, useTestDatabase } from '../support/database.js';
import { api, enqueueAndClaim, enqueueAndClaimMany } from '../support/http.js';

const database = useTestDatabase();
const app = useTestApp(database, { BATON_BACKOFF_BASE_MS: '1000' });

const quiet = { warn: () => {} };
const UNKNOWN_TOKEN = '00000000-0000-4000-8000-000000000000';

async function expire(id: string) {
  await sql`UPDATE baton.jobs SET lease_expires_at = now() - interval '1 second' WHERE id = ${id}`.execute(
    database.db,
  );
}

describe('renew', () => {
  it('pushes the lease forward, by the claimed length or by lease_ms', async () => {
    const job = await enqueueAndClaim(app, 'r-renew', { payload: 1 }, { lease_ms: 10_000 });
    const renewed = await api(app).renew(job.id, { lease_token: job.lease_token });
    expect(renewed.status).toBe(200);
    expect(renewed.body).toMatchObject({ id: job.id, lease_ms: 10_000 });
    expect(Date.parse(renewed.body.lease_expires_at)).toBeGreaterThanOrEqual(
      Date.parse(job.lease_expires_at),
    );
    const longer = await api(app).renew(job.id, { lease_token: job.lease_token, lease_ms: 600_000 });
    expect(Date.parse(longer.body.lease_expires_at) - Date.now()).toBeGreaterThan(590_000);
    // The next renew without lease_ms keeps the new length.
    const again = await api(app).renew(job.id, { lease_token: job.lease_token });
    expect(again.body.lease_ms).toBe(600_000);
  });

  it('is a HOT update: a burst of renewals writes no index entries', async () => {
    // A database of its own with a single connection doing all the work, so the table statistics
    // count exactly this test's statements (statistics are flushed per session, lazily).
    const own = await createTestDatabase();
    const handle = createDatabase(
      own.url,
      { poolSize: 1, statementTimeoutMs: 30_000, connectTimeoutMs: 5000 },
      quiet,
    );
    try {
      const single = handle.db;
      const opts = {
        autoCreate: { enabled: true, maxQueues: 1000 },
        defaultMaxAttempts: 5,
        idempotencyRetentionMs: 60_000,
      };
      const items = Array.from({ length: 200 }, (_, i) => ({ payloadJson: String(i), priority: 0 }));
      await enqueueJobs(single, 'hot', items, opts);
      const jobs = await claimJobs(single, { queue: 'hot', maxJobs: 200, defaultLeaseMs: 60_000 });
      const stats = async () => {
        await sql`SELECT pg_stat_force_next_flush()`.execute(single);
        await new Promise((r) => setTimeout(r, 50));
        const { rows } = await sql<{ upd: number; hot: number }>`
          SELECT n_tup_upd::int AS upd, n_tup_hot_upd::int AS hot FROM pg_stat_user_tables
          WHERE schemaname = 'baton' AND relname = 'jobs'`.execute(own.db);
        return rows[0]!;
      };
      const before = await stats();
      for (let round = 0; round < 3; round++) {
        for (const job of jobs) expect(await renewLease(single, job.id, job.lease_token)).toBeDefined();
      }
      let after = await stats();
      for (let i = 0; i < 50 && after.upd - before.upd < 600; i++) after = await stats();
      const updates = after.upd - before.upd;
      const hot = after.hot - before.hot;
      expect(updates).toBe(600);
      expect(hot / updates).toBeGreaterThanOrEqual(0.9);

      // Batch renewals (POST /v1/jobs/renew) are the same update, 200 rows a statement. Mostly HOT,
      // but less than single renewals: PostgreSQL prunes a page's dead versions when a statement
      // first reads it, so one statement rewriting every row of a page can run out of room on it
      // (about 80% HOT here, where the 200 jobs share a few pages). A non-HOT renewal still adds
      // nothing to the ready index that claims walk (a claimed row is not in it).
      const leases = jobs.map((j) => ({ id: j.id, leaseToken: j.lease_token }));
      for (let round = 0; round < 3; round++) {
        expect((await renewLeases(single, leases)).every(Boolean)).toBe(true);
      }
      let batched = await stats();
      for (let i = 0; i < 50 && batched.upd - after.upd < 600; i++) batched = await stats();
      expect(batched.upd - after.upd).toBe(600);
      expect((batched.hot - after.hot) / 600).toBeGreaterThanOrEqual(0.7);
    } finally {
      await handle.close();
      await own.drop();
    }
  });

  it('with a wrong token is 409 lease_lost; an unknown job is 404; a malformed token is 400', async () => {
    const job = await enqueueAndClaim(app, 'r-wrong');
    const wrong = await api(app).renew(job.id, { lease_token: UNKNOWN_TOKEN });
    expect(wrong.status).toBe(409);
    expect(wrong.body.code).toBe('lease_lost');
    const unknown = await api(app).renew('987654321', { lease_token: job.lease_token });
    expect(unknown.status).toBe(404);
    expect(unknown.body.code).toBe('not_found');
    const huge = await api(app).renew('9999999999999999999', { lease_token: job.lease_token });
    expect(huge.status).toBe(400);
    expect(huge.body.detail).toBe(
      'id must be a job id: a decimal number without leading zeros, at most 18 digits',
    );
    const malformed = await api(app).renew(job.id, { lease_token: 'not-a-uuid' });
    expect(malformed.status).toBe(400);
    expect(malformed.body.detail).toBe(
      'lease_token must be a lease token: a UUID such as 3f0e9a52-6a43-4a0c-9d4e-52d1b6e0c001',
    );
  });
});

describe('renew in a batch', () => {
  it('answers each item on its own: renewed with its new expiry, lease_lost, not_found', async () => {
    const q = 'r-batch';
    const jobs = await enqueueAndClaimMany(app, q, 4, { lease_ms: 5000 });
    const sentAt = Date.now();
    const res = await api(app).renewBatch([
      { id: jobs[0].id, lease_token: jobs[0].lease_token },
      { id: jobs[1].id, lease_token: UNKNOWN_TOKEN },
      { id: '99999999', lease_token: jobs[2].lease_token },
      { id: jobs[3].id, lease_token: jobs[3].lease_token, lease_ms: 600_000 },
    ]);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      results: [
        { id: jobs[0].id, outcome: 'renewed', lease_ms: 5000 },
        { id: jobs[1].id, outcome: 'lease_lost' },
        { id: '99999999', outcome: 'not_found' },
        { id: jobs[3].id, outcome: 'renewed', lease_ms: 600_000 },
      ],
      renewed: 2,
      failed: 2,
    });
    expect(res.body.results[1]).not.toHaveProperty('lease_expires_at');
    // Each renewed lease runs from the renewal, with its own length; the others are untouched.
    expect(Date.parse(res.body.results[0].lease_expires_at)).toBeGreaterThanOrEqual(sentAt + 5000 - 5);
    expect(Date.parse(res.body.results[3].lease_expires_at)).toBeGreaterThanOrEqual(sentAt + 600_000 - 5);
    const rows = await database.db
      .selectFrom('baton.jobs')
      .select(['id', 'lease_expires_at'])
      .where('id', 'in', [jobs[0].id, jobs[1].id, jobs[3].id])
      .orderBy('id')
      .execute();
    const expiry = new Map(rows.map((r) => [String(r.id), r.lease_expires_at?.toISOString()]));
    expect(expiry.get(jobs[0].id)).toBe(res.body.results[0].lease_expires_at);
    expect(expiry.get(jobs[1].id)).toBe(jobs[1].lease_expires_at);
    expect(expiry.get(jobs[3].id)).toBe(res.body.results[3].lease_expires_at);
  });

  it('rejects a repeated id or a bad lease_ms with a 400 naming the item, and renews nothing', async () => {
    const job = await enqueueAndClaim(app, 'r-batch-bad');
    const repeated = await api(app).renewBatch([
      { id: job.id, lease_token: job.lease_token },
      { id: job.id, lease_token: job.lease_token },
    ]);
    expect(repeated.status).toBe(400);
    expect(repeated.body.detail).toBe(`renewals[1].id repeats job ${job.id}`);
    const tooShort = await api(app).renewBatch([
      { id: job.id, lease_token: job.lease_token },
      { id: '1', lease_token: job.lease_token, lease_ms: 10 },
    ]);
    expect(tooShort.status).toBe(400);
    expect(tooShort.body.errors[0].field).toBe('renewals[1].lease_ms');
    expect((await api(app).renewBatch([])).status).toBe(400);
    const row = await database.db
      .selectFrom('baton.jobs')
      .select('lease_expires_at')
      .where('id', '=', job.id)
      .executeTakeFirstOrThrow();
    expect(row.lease_expires_at?.toISOString()).toBe(job.lease_expires_at);
  });
});

describe('ack', () => {
  it('completes the job and stores its result; the job leaves the live table', async () => {
    const job = await enqueueAndClaim(app, 'a-ack', { payload: { n: 1 } });
    const res = await api(app).ack(job.id, { lease_token: job.lease_token, result: { sent: true } });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ id: job.id, state: 'completed', result: { sent: true }, attempts: 1 });
    expect(res.body.finished_at).toEqual(expect.any(String));
    const live = await database.db.selectFrom('baton.jobs').select('id').where('id', '=', job.id).execute();
    expect(live).toHaveLength(0);
    const got = await api(app).get(job.id);
    expect(got.body).toMatchObject({ state: 'completed', result: { sent: true }, payload: { n: 1 } });
  });

  it('one with a wrong token is 409 lease_lost; an unknown job is 404', async () => {
    const job = await enqueueAndClaim(app, 'a-twice');
    const wrong = await api(app).ack(job.id, { lease_token: UNKNOWN_TOKEN });
    expect(wrong.status).toBe(409);
    expect(wrong.body.code).toBe('lease_lost');
    expect((await api(app).ack(job.id, { lease_token: job.lease_token })).status).toBe(200);
    expect((await api(app).ack(job.id, { lease_token: UNKNOWN_TOKEN })).status).toBe(409);
    expect((await api(app).ack('123456789', { lease_token: job.lease_token })).status).toBe(404);
  });

  it('is safe to retry: repeating an ack of the same lease answers 200 with the same job', async () => {
    const job = await enqueueAndClaim(app, 'a-retry');
    const first = await api(app).ack(job.id, { lease_token: job.lease_token, result: 'r' });
    const again = await api(app).ack(job.id, { lease_token: job.lease_token, result: 'other' });
    expect(again.status).toBe(200);
    expect(again.body).toEqual(first.body);
    const batch = await api(app).ackBatch([{ id: job.id, lease_token: job.lease_token }]);
    expect(batch.body.results).toEqual([{ id: job.id, outcome: 'acked' }]);
    // A token of an earlier attempt of the same job is still refused.
    const redone = await enqueueAndClaim(app, 'a-retry-2');
    await api(app).nack(redone.id, { lease_token: redone.lease_token, retry_in_ms: 0 });
    const [second] = (await api(app).claim('a-retry-2')).body.jobs;
    await api(app).ack(second.id, { lease_token: second.lease_token });
    expect((await api(app).ack(redone.id, { lease_token: redone.lease_token })).status).toBe(409);
  });

  it('of a job that is not claimed is 409', async () => {
    const enq = await api(app).enqueue('a-ready', { payload: 1 });
    const res = await api(app).ack(enq.body.id, { lease_token: UNKNOWN_TOKEN });
    expect(res.status).toBe(409);
  });

  it('in a batch answers each item on its own: one stale token does not fail the others', async () => {
    const q = 'a-batch';
    const jobs = await enqueueAndClaimMany(app, q, 5);
    const res = await api(app).ackBatch([
      { id: jobs[0].id, lease_token: jobs[0].lease_token, result: 'r0' },
      { id: jobs[1].id, lease_token: UNKNOWN_TOKEN },
      { id: '99999999', lease_token: jobs[2].lease_token },
      { id: jobs[3].id, lease_token: jobs[3].lease_token },
    ]);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      results: [
        { id: jobs[0].id, outcome: 'acked' },
        { id: jobs[1].id, outcome: 'lease_lost' },
        { id: '99999999', outcome: 'not_found' },
        { id: jobs[3].id, outcome: 'acked' },
      ],
      acked: 2,
      failed: 2,
    });
    expect((await api(app).get(jobs[0].id)).body).toMatchObject({ state: 'completed', result: 'r0' });
    expect((await api(app).get(jobs[1].id)).body.state).toBe('claimed');
  });

  it('in a batch rejects a repeated id with a 400 naming it', async () => {
    const job = await enqueueAndClaim(app, 'a-dup');
    const res = await api(app).ackBatch([
      { id: job.id, lease_token: job.lease_token },
      { id: job.id, lease_token: job.lease_token },
    ]);
    expect(res.status).toBe(400);
    expect(res.body.detail).toBe(`acks[1].id repeats job ${job.id}`);
    expect((await api(app).get(job.id)).body.state).toBe('claimed');
  });
});

describe('nack', () => {
  it('without retry_in_ms schedules a retry after the backoff and records the error', async () => {
    const job = await enqueueAndClaim(app, 'n-backoff');
    const sentAt = Date.now();
    const res = await api(app).nack(job.id, {
      lease_token: job.lease_token,
      error: { message: 'smtp timeout', details: { code: 421 } },
    });
    const answeredAt = Date.now();
    expect(res.status).toBe(200);
    expect(res.body.state).toBe('scheduled');
    // Attempt 1 with base 1000 ms and jitter: between 500 and 1000 ms after the nack ran, which was
    // between sending it and its answer (bounds that hold however slow the machine is).
    const runAt = Date.parse(res.body.run_at);
    expect(runAt - sentAt).toBeGreaterThanOrEqual(500 - 5);
    expect(runAt - answeredAt).toBeLessThanOrEqual(1000);
    expect(res.body.last_error).toMatchObject({
      attempt: 1,
      message: 'smtp timeout',
      details: { code: 421 },
    });
    expect(res.body.errors).toHaveLength(1);
    expect((await api(app).claim('n-backoff')).body.jobs).toEqual([]);
  });

  it('with retry_in_ms 0 makes the job ready again at once; the next claim is attempt 2', async () => {
    const job = await enqueueAndClaim(app, 'n-now');
    const res = await api(app).nack(job.id, {
      lease_token: job.lease_token,
      retry_in_ms: 0,
      error: { message: 'e1' },
    });
    expect(res.body.state).toBe('ready');
    const [again] = (await api(app).claim('n-now')).body.jobs;
    expect(again).toMatchObject({ id: job.id, attempt: 2 });
    expect(again.lease_token).not.toBe(job.lease_token);
  });

  it('with dead: true dead-letters the job whatever its attempts', async () => {
    const job = await enqueueAndClaim(app, 'n-dead', { payload: 1, max_attempts: 10 });
    const res = await api(app).nack(job.id, {
      lease_token: job.lease_token,
      dead: true,
      error: { message: 'bad input' },
    });
    expect(res.body).toMatchObject({ state: 'dead', dead_reason: 'nacked_dead', attempts: 1 });
    expect(res.body.last_error.message).toBe('bad input');
  });

  it('on the last attempt dead-letters the job with attempts_exhausted', async () => {
    const q = 'n-exhausted';
    const job = await enqueueAndClaim(app, q, { payload: 1, max_attempts: 2 });
    await api(app).nack(job.id, {
      lease_token: job.lease_token,
      retry_in_ms: 0,
      error: { message: 'first' },
    });
    const [second] = (await api(app).claim(q)).body.jobs;
    const res = await api(app).nack(second.id, {
      lease_token: second.lease_token,
      error: { message: 'second' },
    });
    expect(res.body).toMatchObject({ state: 'dead', dead_reason: 'attempts_exhausted', attempts: 2 });
    expect(res.body.errors.map((e: { message: string }) => e.message)).toEqual(['first', 'second']);
    expect((await api(app).get(job.id)).body.state).toBe('dead');
  });

  it('with a stale token is 409; an unknown job is 404; a bad retry_in_ms is 400', async () => {
    const job = await enqueueAndClaim(app, 'n-wrong');
    expect((await api(app).nack(job.id, { lease_token: UNKNOWN_TOKEN })).status).toBe(409);
    expect((await api(app).nack('77777777', { lease_token: job.lease_token })).status).toBe(404);
    const bad = await api(app).nack(job.id, { lease_token: job.lease_token, retry_in_ms: -1 });
    expect(bad.status).toBe(400);
    expect(bad.body.detail).toBe('retry_in_ms must be >= 0');
    const nul = await api(app).nack(job.id, { lease_token: job.lease_token, error: { message: 'a\u0000b' } });
    expect(nul.status).toBe(400);
    expect(nul.body.detail).toMatch(/^error.message must not contain the NUL/);
  });
});

describe('a stale worker', () => {
  it('gets 409 on renew, ack and nack once its lease was re-armed and the job re-claimed; the new holder acks', async () => {
    const q = 's-stale';
    const first = await enqueueAndClaim(app, q, { payload: 1 }, { lease_ms: 1000, worker_id: 'slow' });
    await expire(first.id);
    const rearmed = await rearmExpiredLeases(database.db, 100);
    expect(rearmed.ready.get(q)).toBe(1);
    const [second] = (await api(app).claim(q, { worker_id: 'fresh' })).body.jobs;
    expect(second).toMatchObject({ id: first.id, attempt: 2 });

    for (const call of [
      api(app).renew(first.id, { lease_token: first.lease_token }),
      api(app).ack(first.id, { lease_token: first.lease_token }),
      api(app).nack(first.id, { lease_token: first.lease_token }),
    ]) {
      const res = await call;
      expect(res.status).toBe(409);
      expect(res.body.code).toBe('lease_lost');
    }
    const ack = await api(app).ack(second.id, { lease_token: second.lease_token });
    expect(ack.status).toBe(200);
    expect(ack.body).toMatchObject({ state: 'completed', attempts: 2, worker_id: 'fresh' });
    expect(ack.body.errors).toEqual([
      expect.objectContaining({ attempt: 1, message: 'lease expired', worker_id: 'slow' }),
    ]);
  });

  it('a lease that expires on the last attempt dead-letters the job with lease_expired', async () => {
    const job = await enqueueAndClaim(app, 's-last', { payload: 1, max_attempts: 1 });
    await expire(job.id);
    const rearmed = await rearmExpiredLeases(database.db, 100);
    expect(rearmed.dead.get('s-last')).toBe(1);
    expect((await api(app).get(job.id)).body).toMatchObject({ state: 'dead', dead_reason: 'lease_expired' });
  });
});

describe('cancel', () => {
  it('cancels a ready, a scheduled and a claimed job; the claimed one’s worker then gets 409', async () => {
    const ready = await api(app).enqueue('x-cancel', { payload: 1 });
    const scheduled = await api(app).enqueue('x-cancel', { payload: 2, delay_ms: 60_000 });
    const claimed = await enqueueAndClaim(app, 'x-cancel-claimed');
    for (const id of [ready.body.id, scheduled.body.id, claimed.id]) {
      const res = await api(app).cancel(id);
      expect(res.status).toBe(200);
      expect(res.body.state).toBe('cancelled');
    }
    expect((await api(app).ack(claimed.id, { lease_token: claimed.lease_token })).status).toBe(409);
    expect((await api(app).renew(claimed.id, { lease_token: claimed.lease_token })).status).toBe(409);
    expect((await api(app).claim('x-cancel')).body.jobs).toEqual([]);
  });

  it('is idempotent on a cancelled job, 409 on a finished one, 404 on an unknown one', async () => {
    const enq = await api(app).enqueue('x-cancel-2', { payload: 1 });
    await api(app).cancel(enq.body.id);
    const again = await api(app).cancel(enq.body.id);
    expect(again.status).toBe(200);
    expect(again.body.state).toBe('cancelled');
    const done = await enqueueAndClaim(app, 'x-cancel-3');
    await api(app).ack(done.id, { lease_token: done.lease_token });
    const finished = await api(app).cancel(done.id);
    expect(finished.status).toBe(409);
    expect(finished.body).toMatchObject({
      code: 'invalid_state',
      detail: `job ${done.id} is already completed and cannot be cancelled`,
    });
    expect((await api(app).cancel('555555555')).status).toBe(404);
  });
});

describe('GET /v1/jobs/{id}', () => {
  it('shows a claimed job with its lease expiry but never its lease token', async () => {
    const job = await enqueueAndClaim(app, 'g-show', { payload: { secret: false } }, { worker_id: 'w9' });
    const res = await app.inject({ method: 'GET', url: `/v1/jobs/${job.id}` });
    expect(res.statusCode).toBe(200);
    expect(res.body).not.toContain(job.lease_token);
    expect(res.json()).not.toHaveProperty('lease_token');
    expect(res.json()).toMatchObject({
      state: 'claimed',
      worker_id: 'w9',
      attempts: 1,
      lease_expires_at: job.lease_expires_at,
    });
  });

  it('is 404 problem+json for an unknown job', async () => {
    const res = await api(app).get('424242');
    expect(res.status).toBe(404);
    expect(res.body).toMatchObject({ code: 'not_found', detail: 'job 424242 does not exist' });
  });
});
