import { describe, expect, it } from 'vitest';
import { useTestApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { api, enqueueAndClaim, enqueueAndClaimMany } from '../support/http.js';

const database = useTestDatabase();
const app = useTestApp(database, { BATON_BACKOFF_BASE_MS: '1000' });

const UNKNOWN_TOKEN = '00000000-0000-4000-8000-000000000000';

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

  it('after it completed, a wrong token is still 409 (only the same lease repeats the answer)', async () => {
    const job = await enqueueAndClaim(app, 'a-twice');
    expect((await api(app).ack(job.id, { lease_token: job.lease_token })).status).toBe(200);
    expect((await api(app).ack(job.id, { lease_token: UNKNOWN_TOKEN })).status).toBe(409);
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
