import { describe, expect, it } from 'vitest';
import { createTestApp, useTestApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { api } from '../support/http.js';
import { apiKeyEntry, bearer } from '../support/keys.js';

const database = useTestDatabase();
const app = useTestApp(database);

const workers = async (query = '') => {
  const res = await app.inject({ method: 'GET', url: `/v1/workers${query}` });
  expect(res.statusCode, res.body).toBe(200);
  return res.json() as {
    workers: {
      worker_id: string | null;
      queue: string;
      jobs: number;
      oldest_claimed_at: string;
      last_renewed_at: string;
      next_expiry_at: string;
    }[];
    as_of: string;
  };
};

describe('who holds leases now (GET /v1/workers)', () => {
  it('lists each worker per queue with its jobs, oldest claim, last renewal and next expiry; gone once acked', async () => {
    expect((await workers()).workers).toEqual([]);
    await api(app).enqueueBatch(
      'w-mail',
      Array.from({ length: 5 }, (_, i) => ({ payload: i })),
    );
    await api(app).enqueue('w-pdf', { payload: 'x' });
    const a = (await api(app).claim('w-mail', { max_jobs: 3, worker_id: 'host-a:1', lease_ms: 30_000 })).body
      .jobs;
    const b = (await api(app).claim('w-mail', { max_jobs: 2, worker_id: 'host-b:7', lease_ms: 30_000 })).body
      .jobs;
    const anonymous = (await api(app).claim('w-pdf', { max_jobs: 1 })).body.jobs;
    expect([a.length, b.length, anonymous.length]).toEqual([3, 2, 1]);

    await new Promise((r) => setTimeout(r, 20));
    const renewed = await api(app).renew(a[0].id, { lease_token: a[0].lease_token, lease_ms: 60_000 });
    expect(renewed.status).toBe(200);

    const listed = await workers();
    expect(listed.workers.map((w) => [w.worker_id, w.queue, w.jobs])).toEqual([
      ['host-a:1', 'w-mail', 3],
      ['host-b:7', 'w-mail', 2],
      [null, 'w-pdf', 1],
    ]);
    const [hostA, hostB] = listed.workers;
    const t = (s: string) => Date.parse(s);
    // The renewal is host A's latest lease; its first to run out is one it did not renew.
    expect(t(hostA!.last_renewed_at)).toBeGreaterThan(t(hostB!.last_renewed_at));
    expect(t(hostA!.oldest_claimed_at)).toBeLessThanOrEqual(t(hostA!.last_renewed_at));
    expect(t(hostA!.next_expiry_at)).toBeLessThan(t(renewed.body.lease_expires_at));
    expect(t(hostA!.next_expiry_at)).toBeGreaterThan(t(listed.as_of));

    // One queue only.
    expect((await workers('?queue=w-pdf')).workers.map((w) => w.queue)).toEqual(['w-pdf']);

    // Acked jobs are no longer held; a worker holding nothing is not listed.
    await api(app).ackBatch(
      b.map((j: { id: string; lease_token: string }) => ({ id: j.id, lease_token: j.lease_token })),
    );
    expect((await workers()).workers.map((w) => w.worker_id)).toEqual(['host-a:1', null]);
  });

  it('shows a key limited to some queues only the workers of those queues', async () => {
    await api(app).enqueue('w-secret', { payload: 1 });
    await api(app).claim('w-secret', { worker_id: 'secret-worker' });
    const limited = await createTestApp(database, {
      BATON_API_KEYS: JSON.stringify([apiKeyEntry('limited', ['consumer'], ['w-mail'])]),
    });
    try {
      const res = await limited.inject({ method: 'GET', url: '/v1/workers', headers: bearer('limited') });
      expect(res.statusCode).toBe(200);
      const queues = res.json().workers.map((w: { queue: string }) => w.queue);
      expect(queues).not.toContain('w-secret');
      expect(queues).toContain('w-mail');
    } finally {
      await limited.close();
    }
  });

  it('refuses a bad query naming the field', async () => {
    const res = await app.inject({ method: 'GET', url: '/v1/workers?limit=0' });
    expect(res.statusCode).toBe(400);
    expect(res.json().errors[0].field).toBe('limit');
  });
});

describe('workers that announce themselves (PUT /v1/workers/{id})', () => {
  const KEYS = JSON.stringify([
    apiKeyEntry('root', ['admin']),
    apiKeyEntry('a-worker', ['consumer', 'producer'], ['wa.*']),
    apiKeyEntry('b-worker', ['consumer', 'producer'], ['wb.*']),
  ]);
  const as = (who: string, method: 'GET' | 'PUT' | 'POST' | 'DELETE', url: string, payload?: object) =>
    keyed.inject({ method, url, headers: bearer(who), ...(payload ? { payload } : {}) });
  let keyed: Awaited<ReturnType<typeof createTestApp>>;

  it('listed idle, then busy with the jobs it holds; a claim keeps it alive; gone after the silence, or when it says so', async () => {
    keyed = await createTestApp(database, { BATON_API_KEYS: KEYS, BATON_WORKER_SILENCE_MS: '1500' });
    try {
      const announce = {
        queues: ['wa.mail'],
        host: 'web-3',
        pid: 4242,
        concurrency: 4,
        version: 'mailer 2.1.0',
      };
      const put = await as('a-worker', 'PUT', '/v1/workers/mailer-1', announce);
      expect([put.statusCode, put.json()]).toEqual([200, { announced: true, silence_ms: 1500 }]);
      const listed = async (who = 'a-worker') => (await as(who, 'GET', '/v1/workers')).json().announced;
      expect(await listed()).toEqual([
        expect.objectContaining({
          id: 'mailer-1',
          host: 'web-3',
          pid: 4242,
          concurrency: 4,
          busy: false,
          jobs: 0,
        }),
      ]);

      await as('a-worker', 'POST', '/v1/queues/wa.mail/jobs/batch', {
        jobs: [{ payload: 1 }, { payload: 2 }],
      });
      const claimed = (
        await as('a-worker', 'POST', '/v1/queues/wa.mail/claim', { max_jobs: 2, worker_id: 'mailer-1' })
      ).json().jobs;
      const [busy] = await listed();
      expect(busy).toMatchObject({ busy: true, jobs: 2 });
      // Filtered by queue: listed under its own queue, not under another.
      const inQueue = async (queue: string) =>
        (await as('a-worker', 'GET', `/v1/workers?queue=${queue}`))
          .json()
          .announced.map((w: { id: string }) => w.id);
      expect(await inQueue('wa.mail')).toEqual(['mailer-1']);
      expect(await inQueue('wa.other')).toEqual([]);
      expect([...busy.job_ids].sort()).toEqual(claimed.map((j: { id: string }) => j.id).sort());

      // Past the silence with no announcement: still listed, since its claim a moment ago was a sign of life.
      await new Promise((r) => setTimeout(r, 1000));
      expect((await listed()).map((w: { id: string }) => w.id)).toEqual(['mailer-1']);
      await new Promise((r) => setTimeout(r, 1600));
      expect(await listed()).toEqual([]);
      // Announced again: back; said goodbye: gone, and a second goodbye is a 404.
      await as('a-worker', 'PUT', '/v1/workers/mailer-1', announce);
      expect(await listed()).toHaveLength(1);
      expect((await as('a-worker', 'DELETE', '/v1/workers/mailer-1')).statusCode).toBe(200);
      expect(await listed()).toEqual([]);
      expect((await as('a-worker', 'DELETE', '/v1/workers/mailer-1')).statusCode).toBe(404);
    } finally {
      await keyed.close();
    }
  });

  it('a tenant’s workers are its own: another key cannot name its queues, overwrite or refresh its worker, or see it', async () => {
    keyed = await createTestApp(database, { BATON_API_KEYS: KEYS });
    try {
      expect(
        (await as('a-worker', 'PUT', '/v1/workers/shared-name', { queues: ['wa.pdf'], host: 'a-host' }))
          .statusCode,
      ).toBe(200);
      const theirs = await as('b-worker', 'PUT', '/v1/workers/shared-name', {
        queues: ['wa.pdf'],
        host: 'b-host',
      });
      expect([theirs.statusCode, theirs.json().code]).toEqual([403, 'forbidden']);
      expect(
        (await as('b-worker', 'PUT', '/v1/workers/shared-name', { queues: ['wb.pdf'], host: 'b-host' }))
          .statusCode,
      ).toBe(200);
      const hostsSeenBy = async (who: string) =>
        (await as(who, 'GET', '/v1/workers'))
          .json()
          .announced.map((w: { host: string }) => w.host)
          .sort();
      expect(await hostsSeenBy('a-worker')).toEqual(['a-host']);
      expect(await hostsSeenBy('b-worker')).toEqual(['b-host']);
      expect(await hostsSeenBy('root')).toEqual(['a-host', 'b-host']);
      // B's goodbye under the shared name forgets only B's worker.
      expect((await as('b-worker', 'DELETE', '/v1/workers/shared-name')).statusCode).toBe(200);
      expect(await hostsSeenBy('root')).toEqual(['a-host']);
    } finally {
      await keyed.close();
    }
  });

  it('refuses a bad announcement naming the field', async () => {
    for (const [body, field] of [
      [{}, 'queues'],
      [{ queues: [] }, 'queues'],
      [{ queues: ['ok'], concurrency: 0 }, 'concurrency'],
      [{ queues: ['ok'], pid: 'x' }, 'pid'],
      [{ queues: ['ok'], colour: 'red' }, 'colour'],
    ] as const) {
      const res = await app.inject({ method: 'PUT', url: '/v1/workers/w1', payload: body });
      expect([res.statusCode, res.json().errors?.[0]?.field], JSON.stringify(body)).toEqual([400, field]);
    }
  });
});
