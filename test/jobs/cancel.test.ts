import { describe, expect, it } from 'vitest';
import { useTestApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { api, enqueueAndClaim } from '../support/http.js';

const database = useTestDatabase();
const app = useTestApp(database, { BATON_BACKOFF_BASE_MS: '1000' });

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
