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
  more: boolean;
}

const bulk = async (body: object, on: BatonApp = app, headers: Record<string, string> = {}) => {
  const res = await on.inject({ method: 'POST', url: '/v1/jobs/bulk', payload: body, headers });
  expect(res.statusCode, res.body).toBe(200);
  return res.json() as Answer;
};

/** `n` jobs of `queue`, claimed and sent to dead (with `message` as their last error). */
async function dead(queue: string, n: number, extra: object = {}, message = 'boom'): Promise<string[]> {
  const enq = await api(app).enqueueBatch(
    queue,
    Array.from({ length: n }, (_, i) => ({ payload: i, ...extra })),
  );
  expect(enq.status).toBe(201);
  const jobs = (await api(app).claim(queue, { max_jobs: n })).body.jobs;
  for (const job of jobs) {
    await api(app).nack(job.id, { lease_token: job.lease_token, error: { message }, dead: true });
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

/** GET /v1/jobs with count=true: the list's first page and its count. */
const counted = async (query: string, on: BatonApp = app, headers: Record<string, string> = {}) => {
  const res = await on.inject({ method: 'GET', url: `/v1/jobs?count=true&${query}`, headers });
  expect(res.statusCode, res.body).toBe(200);
  return res.json() as { jobs: { id: string }[]; total: number; total_capped: boolean; counted_at: string };
};

describe('one action on every job of a list (POST /v1/jobs/bulk with match)', () => {
  it('redrives every dead job matching the filters that died by the count’s time, across queues and pages, and no other', async () => {
    const smtp = [
      ...(await dead('bm-mail', 700, {}, 'SMTP timeout')),
      ...(await dead('bm-mail-eu', 400, {}, 'smtp TIMEOUT at relay')),
    ];
    const other = await dead('bm-mail', 3, {}, 'bad address');
    const count = await counted('state=dead&error=smtp%20timeout');
    expect(count).toMatchObject({ total: 1100, total_capped: false });
    // Dies after the count: not one of the jobs the operator confirmed.
    const [late] = await dead('bm-mail', 1, {}, 'SMTP timeout, later');

    const answer = await bulk({
      action: 'redrive',
      match: { state: 'dead', error: 'smtp timeout', until: count.counted_at },
    });
    expect([answer.done, answer.failed, answer.more]).toEqual([1100, 0, false]);
    // Newest death first, as the list shows them; each job once.
    expect(answer.results.map((r) => r.id)).toEqual([...smtp].reverse());
    expect(new Set(answer.results.map((r) => r.outcome))).toEqual(new Set(['redriven']));
    for (const id of [late!, ...other]) expect((await api(app).get(id)).body.state).toBe('dead');
    const ready = (await api(app).claim('bm-mail-eu', { max_jobs: 1000 })).body.jobs;
    expect(ready).toHaveLength(400);
    expect((await counted('state=dead&error=smtp%20timeout')).total).toBe(1);
  });

  it('cancels, or runs now, the failing jobs of a queue and group; a job that never failed is left alone', async () => {
    const enq = await api(app).enqueueBatch(
      'bm-retry',
      Array.from({ length: 6 }, (_, i) => ({ payload: i, group: i < 4 ? 'acme' : 'other' })),
    );
    expect(enq.status).toBe(201);
    const jobs = (await api(app).claim('bm-retry', { max_jobs: 6 })).body.jobs;
    for (const job of jobs) {
      await api(app).nack(job.id, {
        lease_token: job.lease_token,
        error: { message: 'flaky' },
        retry_in_ms: 3_600_000,
      });
    }
    const fresh = (
      await api(app).enqueue('bm-retry', { payload: 'never failed', group: 'acme', delay_ms: 3_600_000 })
    ).body.id;
    const acme = jobs.filter((j: { group: string }) => j.group === 'acme').map((j: { id: string }) => j.id);
    expect(acme).toHaveLength(4);

    const now = await bulk({
      action: 'run_now',
      match: { state: 'failing', queue: 'bm-retry', group: 'acme' },
    });
    expect(now.results.map((r) => r.id).sort()).toEqual([...acme].sort());
    expect(now.results.every((r) => r.outcome === 'ready_now' && r.state === 'ready')).toBe(true);
    const cancel = await bulk({ action: 'cancel', match: { state: 'failing', queue: 'bm-retry' } });
    expect(cancel.done).toBe(6);
    for (const job of jobs) expect((await api(app).get(job.id)).body.state).toBe('cancelled');
    expect((await api(app).get(fresh)).body.state).toBe('scheduled');
  });

  it('two operators redriving the same list at once on two replicas: each job redriven once, by exactly one of them', async () => {
    for (let round = 0; round < 3; round++) {
      const ids = await dead(`bm-race-${round}`, 60);
      const match = { state: 'dead', queue: `bm-race-${round}` };
      const [a, b] = await Promise.all([
        bulk({ action: 'redrive', match }),
        bulk({ action: 'redrive', match }, other),
      ]);
      const byA = a.results.filter((r) => r.outcome === 'redriven').map((r) => r.id);
      const byB = b.results.filter((r) => r.outcome === 'redriven').map((r) => r.id);
      expect(byA.filter((id) => byB.includes(id))).toEqual([]);
      expect([...byA, ...byB].sort()).toEqual([...ids].sort());
      const claimed = (await api(app).claim(`bm-race-${round}`, { max_jobs: 100 })).body.jobs;
      expect(new Set(claimed.map((j: { id: string }) => j.id)).size).toBe(60);
    }
  });

  it('to a key limited to some queues, a list is only its queues’ jobs: another tenant’s are neither counted nor touched', async () => {
    const mine = await dead('bmt-mine', 2, {}, 'tenant boom');
    const theirs = await dead('bmt-theirs', 3, {}, 'tenant boom');
    const limited = await createTestApp(database, {
      BATON_API_KEYS: JSON.stringify([apiKeyEntry('ops', ['admin'], ['bmt-mine'])]),
    });
    try {
      expect((await counted('state=dead&error=tenant%20boom', limited, bearer('ops'))).total).toBe(2);
      for (const action of ['delete', 'redrive']) {
        const answer = await bulk(
          { action, match: { state: 'dead', error: 'tenant boom' } },
          limited,
          bearer('ops'),
        );
        expect(answer.results.map((r) => r.id).sort()).toEqual(action === 'delete' ? [...mine].sort() : []);
      }
      for (const id of theirs) expect((await api(app).get(id)).body.state).toBe('dead');
      for (const id of mine) expect((await api(app).get(id)).status).toBe(404);
    } finally {
      await limited.close();
    }
  });

  it('refuses a bad match with a 400 naming the field, and changes nothing', async () => {
    const [job] = await dead('bm-bad', 1);
    const cases: [object, string][] = [
      [{ action: 'redrive', ids: [job], match: { state: 'dead' } }, 'match'],
      [{ action: 'redrive', match: {} }, 'match'],
      [{ action: 'redrive', match: { state: 'ready' } }, 'match'],
      [{ action: 'redrive', match: { state: 'dead', until: 'yesterday' } }, 'until'],
      [{ action: 'redrive', match: { state: 'dead', error: 'x'.repeat(201) } }, 'error'],
      [{ action: 'redrive', match: { state: 'dead', nope: 1 } }, 'match'],
    ];
    for (const [body, field] of cases) {
      const res = await app.inject({ method: 'POST', url: '/v1/jobs/bulk', payload: body });
      expect(res.statusCode, JSON.stringify(body)).toBe(400);
      expect(res.json().errors[0].field, JSON.stringify(body)).toContain(field);
    }
    const key = await app.inject({ method: 'GET', url: '/v1/jobs?unique_key=k&count=true' });
    expect(key.statusCode).toBe(400);
    expect(key.json().errors[0].field).toBe('count');
    expect((await api(app).get(job!)).body.state).toBe('dead');
  });
});
