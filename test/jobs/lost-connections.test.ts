import { sql } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BatonApp } from '../../src/app.js';
import { createTestApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { api, enqueueAndClaim, type Reply } from '../support/http.js';
import { until } from '../support/until.js';

const database = useTestDatabase();

/**
 * A request whose connection is terminated while its statement runs (pg_terminate_backend, as an
 * operator, a failover or a pooler does). To catch each statement in flight, a connection of the
 * test's own holds baton.jobs locked: the request's statement waits for the lock, the test
 * terminates the backend that waits, and then lets the lock go.
 */
describe('a connection terminated under a request', () => {
  let app: BatonApp;
  let locker: pg.Client;
  beforeAll(async () => {
    app = await createTestApp(database);
    locker = new pg.Client({ connectionString: database.url });
    await locker.connect();
  });
  afterAll(async () => {
    await locker.end();
    await app.close();
  });

  /** Backends of the app waiting for a lock. */
  const waiting = async () =>
    (
      await sql<{ pid: number }>`SELECT pid FROM pg_stat_activity
        WHERE datname = current_database() AND application_name = 'baton' AND wait_event_type = 'Lock'`.execute(
        database.db,
      )
    ).rows.map((r) => r.pid);

  /**
   * Send `request` while baton.jobs is locked, terminate the backend running it `times` times (each
   * time once it waits for the lock), then unlock: the request's answer.
   */
  async function terminatedUnder(request: () => Promise<Reply>, times = 1): Promise<Reply> {
    await locker.query('BEGIN');
    await locker.query('LOCK TABLE baton.jobs IN ACCESS EXCLUSIVE MODE');
    const answer = request();
    const terminated: number[] = [];
    try {
      for (let i = 0; i < times; i++) {
        let pid: number | undefined;
        await until(async () => {
          pid = (await waiting()).find((p) => !terminated.includes(p));
          return pid !== undefined;
        });
        terminated.push(pid!);
        await sql`SELECT pg_terminate_backend(${pid!}::int)`.execute(database.db);
      }
      // A request that runs its statement again waits for the lock once more before it is let go.
      await new Promise((resolve) => setTimeout(resolve, 100));
    } finally {
      await locker.query('ROLLBACK');
    }
    return answer;
  }

  it('a claim is run again on a fresh connection and hands out the job', async () => {
    const { body: job } = await api(app).enqueue('lost-claim', { payload: 1 });
    const res = await terminatedUnder(() => api(app).claim('lost-claim'));
    expect(res.status).toBe(200);
    expect(res.body.jobs.map((j: { id: string }) => j.id)).toEqual([job.id]);
  });

  it('an ack is run again and completes the job; a renew too', async () => {
    const job = await enqueueAndClaim(app, 'lost-ack');
    const renewed = await terminatedUnder(() => api(app).renew(job.id, { lease_token: job.lease_token }));
    expect(renewed.status).toBe(200);
    const acked = await terminatedUnder(() =>
      api(app).ack(job.id, { lease_token: job.lease_token, result: 7 }),
    );
    expect(acked.status).toBe(200);
    expect(acked.body).toMatchObject({ id: job.id, state: 'completed', result: 7 });
  });

  it('a batch ack and an ack with next are run again; next still claims', async () => {
    const first = await enqueueAndClaim(app, 'lost-batch');
    const batch = await terminatedUnder(() =>
      api(app).ackBatch([{ id: first.id, lease_token: first.lease_token }]),
    );
    expect(batch.status).toBe(200);
    expect(batch.body.results[0]).toMatchObject({ id: first.id, outcome: 'acked' });

    const second = await enqueueAndClaim(app, 'lost-batch');
    const { body: third } = await api(app).enqueue('lost-batch', { payload: 3 });
    const withNext = await terminatedUnder(() =>
      api(app).ack(second.id, { lease_token: second.lease_token, next: { max_jobs: 1 } }),
    );
    expect(withNext.status).toBe(200);
    expect(withNext.body.state).toBe('completed');
    expect(withNext.body.next.map((j: { id: string }) => j.id)).toEqual([third.id]);
  });

  it('a read is run again', async () => {
    const { body: job } = await api(app).enqueue('lost-read', { payload: 1 });
    const res = await terminatedUnder(() => api(app).get(job.id));
    expect(res.status).toBe(200);
    expect(res.body.id).toBe(job.id);
  });

  it('an enqueue with an idempotency key is run again; one without is answered 503 and wrote nothing', async () => {
    const keyed = await terminatedUnder(() =>
      api(app).enqueue('lost-enqueue', { payload: 'keyed', idempotency_key: 'k1' }),
    );
    expect(keyed.status).toBe(201);
    const plain = await terminatedUnder(() => api(app).enqueue('lost-enqueue', { payload: 'plain' }));
    expect(plain.status).toBe(503);
    expect(plain.headers['retry-after']).toBeDefined();
    const { body } = await api(app).call('GET', '/v1/queues/lost-enqueue/jobs?state=ready');
    expect(body.jobs.map((j: { id: string }) => j.id)).toEqual([keyed.body.id]);
  });

  it('a nack is run again once its receipt says it did not commit: 200, the attempt failed once', async () => {
    const job = await enqueueAndClaim(app, 'lost-nack');
    const res = await terminatedUnder(() =>
      api(app).nack(job.id, { lease_token: job.lease_token, error: { message: 'x' }, retry_in_ms: 0 }),
    );
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ id: job.id, state: 'ready', attempts: 1 });
    expect(res.body.errors.map((e: { message: string }) => e.message)).toEqual(['x']);
    // The lease ended with the nack: the same nack again is lease_lost, not a second failure.
    const again = await api(app).nack(job.id, { lease_token: job.lease_token, error: { message: 'x' } });
    expect(again.status).toBe(409);
  });

  it('a cancel is run again: the job is cancelled, answered once', async () => {
    const job = await enqueueAndClaim(app, 'lost-cancel');
    const res = await terminatedUnder(() => api(app).cancel(job.id));
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ id: job.id, state: 'cancelled' });
    expect((await api(app).get(job.id)).body.state).toBe('cancelled');
  });

  it('a connection lost twice is answered 503 with Retry-After, and the claim can be sent again', async () => {
    await api(app).enqueue('lost-twice', { payload: 1 });
    const res = await terminatedUnder(() => api(app).claim('lost-twice'), 2);
    expect(res.status).toBe(503);
    expect(res.headers['retry-after']).toBeDefined();
    const again = await api(app).claim('lost-twice');
    expect(again.body.jobs).toHaveLength(1);
  });
});
