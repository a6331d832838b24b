import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { rearmExpiredLeases } from '../../src/maintenance/rearm.js';
import { useTestApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { api, enqueueAndClaim } from '../support/http.js';

const database = useTestDatabase();
const app = useTestApp(database, { BATON_BACKOFF_BASE_MS: '1000' });

const UNKNOWN_TOKEN = '00000000-0000-4000-8000-000000000000';

async function expire(id: string) {
  await sql`UPDATE baton.jobs SET lease_expires_at = now() - interval '1 second' WHERE id = ${id}`.execute(
    database.db,
  );
}

type LeaseCall = 'renew' | 'ack' | 'nack';
const call = (op: LeaseCall, id: string, lease_token: string) => api(app)[op](id, { lease_token });

describe.each<LeaseCall>(['renew', 'ack', 'nack'])(
  '%s, by anyone but the holder of the current lease',
  (op) => {
    it('with a wrong token is 409 lease_lost and changes nothing', async () => {
      const job = await enqueueAndClaim(app, `ll-wrong-${op}`);
      const res = await call(op, job.id, UNKNOWN_TOKEN);
      expect(res.status).toBe(409);
      expect(res.body).toMatchObject({ code: 'lease_lost', detail: expect.stringContaining(job.id) });
      expect((await api(app).get(job.id)).body).toMatchObject({ state: 'claimed', attempts: 1 });
    });

    it('for a job that never existed is 404 not_found', async () => {
      const job = await enqueueAndClaim(app, `ll-unknown-${op}`);
      const res = await call(op, '987654321', job.lease_token);
      expect(res.status).toBe(404);
      expect(res.body.code).toBe('not_found');
    });

    it('of a job that finished is 409 lease_lost', async () => {
      const job = await enqueueAndClaim(app, `ll-done-${op}`);
      await api(app).cancel(job.id);
      expect((await call(op, job.id, job.lease_token)).status).toBe(409);
    });
  },
);

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
