import { describe, expect, it } from 'vitest';
import type { BatonApp } from '../../src/app.js';
import { createTestApp, useTestReplicas } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { api } from '../support/http.js';
import { apiKeyEntry, bearer } from '../support/keys.js';

const database = useTestDatabase();
const replicas = useTestReplicas(database, 2);
// Filled in by beforeAll: read when a test runs.
const app = new Proxy({} as BatonApp, { get: (_, p) => Reflect.get(replicas[0]!, p, replicas[0]) });
const other = new Proxy({} as BatonApp, { get: (_, p) => Reflect.get(replicas[1]!, p, replicas[1]) });

interface Answer {
  results: { id: string; outcome: string; state: string | null; message?: string }[];
  done: number;
  failed: number;
}

const bulk = async (body: object, on: BatonApp = app, headers: Record<string, string> = {}) => {
  const res = await on.inject({ method: 'POST', url: '/v1/jobs/bulk', payload: body, headers });
  expect(res.statusCode, res.body).toBe(200);
  return res.json() as Answer;
};

/** `n` jobs of `queue`, claimed and sent to dead. */
async function dead(queue: string, n: number, extra: object = {}): Promise<string[]> {
  const enq = await api(app).enqueueBatch(
    queue,
    Array.from({ length: n }, (_, i) => ({ payload: i, ...extra })),
  );
  expect(enq.status).toBe(201);
  const jobs = (await api(app).claim(queue, { max_jobs: n })).body.jobs;
  for (const job of jobs) {
    await api(app).nack(job.id, { lease_token: job.lease_token, error: { message: 'boom' }, dead: true });
  }
  return jobs.map((j: { id: string }) => j.id);
}

async function completed(queue: string, extra: object = {}): Promise<string> {
  const enq = await api(app).enqueue(queue, { payload: 1, ...extra });
  const job = (await api(app).claim(queue)).body.jobs[0];
  await api(app).ack(job.id, { lease_token: job.lease_token });
  return enq.body.id;
}

describe('one action on many jobs, a result per job (POST /v1/jobs/bulk)', () => {
  it('redrives the dead jobs picked and says, in request order, why each other one was not', async () => {
    const [d1, d2] = await dead('b-redrive', 2);
    const ready = (await api(app).enqueue('b-redrive', { payload: 'live' })).body.id;
    const answer = await bulk({ action: 'redrive', ids: [ready, d2, '999999999', d1] });
    expect(answer.results).toMatchObject([
      { id: ready, outcome: 'invalid_state', state: 'ready' },
      { id: d2, outcome: 'redriven', state: 'ready' },
      { id: '999999999', outcome: 'not_found', state: null },
      { id: d1, outcome: 'redriven', state: 'ready' },
    ]);
    expect(answer.results[0]!.message).toMatch(/only a dead job/);
    expect([answer.done, answer.failed]).toEqual([2, 2]);
    // Fresh attempts, error history kept.
    const job = (await api(app).get(d1!)).body;
    expect(job).toMatchObject({ state: 'ready', attempts: 0 });
    expect(job.errors).toHaveLength(1);
  });

  it('runs scheduled jobs now (a retry’s backoff or a delay cut short), and a waiting claim gets them at once', async () => {
    const later = (await api(app).enqueue('b-now', { payload: 'later', delay_ms: 3_600_000 })).body.id;
    await api(app).enqueue('b-now-retry', { payload: 'x' });
    const [job] = (await api(app).claim('b-now-retry')).body.jobs;
    await api(app).nack(job.id, {
      lease_token: job.lease_token,
      error: { message: 'flaky' },
      retry_in_ms: 3_600_000,
    });
    const ready = (await api(app).enqueue('b-now', { payload: 'ready' })).body.id;
    // A worker long-polls the delayed job's queue on the other replica, after the ready job is taken.
    await api(other).claim('b-now', { max_jobs: 1 });
    const waiting = api(other).claim('b-now', { max_jobs: 1, wait_ms: 10_000 });
    const answer = await bulk({ action: 'run_now', ids: [later, job.id, ready] });
    expect(answer.results.map((r) => [r.id, r.outcome, r.state])).toEqual([
      [later, 'ready_now', 'ready'],
      [job.id, 'ready_now', 'ready'],
      [ready, 'invalid_state', 'claimed'],
    ]);
    expect((await waiting).body.jobs.map((j: { id: string }) => j.id)).toEqual([later]);
    // The retried job keeps its attempts and its error.
    expect((await api(app).get(job.id)).body).toMatchObject({ state: 'ready', attempts: 1 });
    expect((await api(app).get(job.id)).body.last_error.message).toBe('flaky');
  });

  it('cancels live jobs in any live state, refuses finished ones, and the claimed one’s worker loses its lease', async () => {
    await api(app).enqueue('b-cancel', { payload: 3 });
    const claimed = (await api(app).claim('b-cancel', { max_jobs: 1 })).body.jobs[0];
    const ready = (await api(app).enqueue('b-cancel', { payload: 1 })).body.id;
    const later = (await api(app).enqueue('b-cancel', { payload: 2, delay_ms: 60_000 })).body.id;
    const done = await completed('b-cancel-done');
    const answer = await bulk({ action: 'cancel', ids: [ready, later, claimed.id, done] });
    expect(answer.results.map((r) => [r.outcome, r.state])).toEqual([
      ['cancelled', 'cancelled'],
      ['cancelled', 'cancelled'],
      ['cancelled', 'cancelled'],
      ['invalid_state', 'completed'],
    ]);
    const ack = await api(app).ack(claimed.id, { lease_token: claimed.lease_token });
    expect(ack.status).toBe(409);
    // Sent again: nothing more is done, and each says why.
    const again = await bulk({ action: 'cancel', ids: [ready] });
    expect(again.results[0]).toMatchObject({ outcome: 'invalid_state', state: 'cancelled' });
  });

  it('deletes finished jobs for good, frees the idempotency key that named one, and never deletes a live job', async () => {
    const [gone] = await dead('b-delete', 1);
    const keyed = await completed('b-delete', { idempotency_key: 'invoice-5' });
    const live = (await api(app).enqueue('b-delete', { payload: 'live' })).body.id;
    const answer = await bulk({ action: 'delete', ids: [gone, keyed, live] });
    expect(answer.results.map((r) => [r.id, r.outcome, r.state])).toEqual([
      [gone, 'deleted', null],
      [keyed, 'deleted', null],
      [live, 'invalid_state', 'ready'],
    ]);
    expect((await api(app).get(gone!)).status).toBe(404);
    expect((await api(app).get(live)).body.state).toBe('ready');
    // The key is free: the producer's retry makes a new job rather than naming one nobody can read.
    const retried = await api(app).enqueue('b-delete', { payload: 1, idempotency_key: 'invoice-5' });
    expect(retried.status).toBe(201);
    expect(retried.body.id).not.toBe(keyed);
    expect((await bulk({ action: 'delete', ids: [gone] })).results[0]!.outcome).toBe('not_found');
  });

  it('two operators redriving the same jobs at once on two replicas: each job is redriven once, and each answer says by whom', async () => {
    for (let round = 0; round < 5; round++) {
      const ids = await dead(`b-race-${round}`, 30);
      const [a, b] = await Promise.all([
        bulk({ action: 'redrive', ids }),
        bulk({ action: 'redrive', ids: [...ids].reverse() }, other),
      ]);
      const byA = a.results.filter((r) => r.outcome === 'redriven').map((r) => r.id);
      const byB = b.results.filter((r) => r.outcome === 'redriven').map((r) => r.id);
      expect([...byA, ...byB].sort()).toEqual([...ids].sort());
      expect(byA.filter((id) => byB.includes(id))).toEqual([]);
      // Exactly 30 jobs to claim, each once.
      const claimed = (await api(app).claim(`b-race-${round}`, { max_jobs: 100 })).body.jobs;
      expect(new Set(claimed.map((j: { id: string }) => j.id)).size).toBe(30);
    }
  });

  it('a delete racing a redrive of the same dead jobs: each job is either deleted or redriven, never both, never lost in between', async () => {
    const ids = await dead('b-race-delete', 40);
    const [deleted, redriven] = await Promise.all([
      bulk({ action: 'delete', ids }),
      bulk({ action: 'redrive', ids }, other),
    ]);
    const d = deleted.results.filter((r) => r.outcome === 'deleted').map((r) => r.id);
    const r = redriven.results.filter((x) => x.outcome === 'redriven').map((x) => x.id);
    expect(d.filter((id) => r.includes(id))).toEqual([]);
    expect([...d, ...r].sort()).toEqual([...ids].sort());
    for (const id of r) expect((await api(app).get(id)).body.state).toBe('ready');
    for (const id of d) expect((await api(app).get(id)).status).toBe(404);
  });

  it('run now racing a cancel of the same scheduled jobs: each job ends ready or cancelled, as the answers say, and none is lost', async () => {
    const enq = await api(app).enqueueBatch(
      'b-race-now',
      Array.from({ length: 40 }, (_, i) => ({ payload: i, delay_ms: 3_600_000 })),
    );
    const ids = enq.body.jobs.map((j: { id: string }) => j.id);
    const [now, cancel] = await Promise.all([
      bulk({ action: 'run_now', ids }),
      bulk({ action: 'cancel', ids: [...ids].reverse() }, other),
    ]);
    const ready = now.results.filter((r) => r.outcome === 'ready_now').map((r) => r.id);
    const cancelled = cancel.results.filter((r) => r.outcome === 'cancelled').map((r) => r.id);
    // A job may be made ready and then cancelled (both happened, in that order); every job was
    // either cancelled or made ready, and those not cancelled are ready to claim, each once.
    expect(ids.filter((id: string) => !ready.includes(id) && !cancelled.includes(id))).toEqual([]);
    const claimed = (await api(app).claim('b-race-now', { max_jobs: 100 })).body.jobs;
    expect(claimed.map((j: { id: string }) => j.id).sort()).toEqual(
      ids.filter((id: string) => !cancelled.includes(id)).sort(),
    );
    for (const id of cancelled) expect((await api(app).get(id)).body.state).toBe('cancelled');
  });

  it('to a key limited to some queues, another tenant’s jobs are not found and stay as they were', async () => {
    const [mine] = await dead('bt-mine', 1);
    const [theirs] = await dead('bt-theirs', 1);
    const limited = await createTestApp(database, {
      BATON_API_KEYS: JSON.stringify([apiKeyEntry('ops', ['admin'], ['bt-mine'])]),
    });
    try {
      for (const action of ['redrive', 'run_now', 'cancel', 'delete']) {
        const answer = await bulk({ action, ids: [theirs] }, limited, bearer('ops'));
        expect(answer.results[0]).toMatchObject({ id: theirs, outcome: 'not_found', state: null });
      }
      expect((await api(app).get(theirs!)).body.state).toBe('dead');
      const answer = await bulk({ action: 'redrive', ids: [mine, theirs] }, limited, bearer('ops'));
      expect(answer.results.map((r) => r.outcome)).toEqual(['redriven', 'not_found']);
    } finally {
      await limited.close();
    }
  });

  it('refuses a bad request with a 400 naming the field, and changes nothing', async () => {
    const [job] = await dead('b-bad', 1);
    const cases: [object, string][] = [
      [{ action: 'explode', ids: [job] }, 'action'],
      [{ action: 'redrive', ids: [job, job] }, 'ids'],
      [{ action: 'redrive', ids: [] }, 'ids'],
      [{ action: 'redrive', ids: Array.from({ length: 1001 }, (_, i) => String(i + 1)) }, 'ids'],
      [{ action: 'redrive', ids: ['abc'] }, 'ids[0]'],
      [{ action: 'redrive' }, 'ids'],
    ];
    for (const [body, field] of cases) {
      const res = await app.inject({ method: 'POST', url: '/v1/jobs/bulk', payload: body });
      expect(res.statusCode, JSON.stringify(body)).toBe(400);
      expect(res.json().errors[0].field, JSON.stringify(body)).toContain(field);
    }
    expect((await api(app).get(job!)).body.state).toBe('dead');
  });
});
