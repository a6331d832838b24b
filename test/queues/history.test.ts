import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { sha256 } from '../../src/auth/api-keys.js';
import { recordQueueHistory } from '../../src/maintenance/queue-history.js';
import { refreshLiveStats } from '../../src/maintenance/queue-stats.js';
import { createTestApp, useTestApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { api, enqueueAndClaim } from '../support/http.js';

const database = useTestDatabase();
const app = useTestApp(database);

describe('GET /v1/queues/{queue}/history', () => {
  it('answers the samples of the last minutes, oldest first', async () => {
    await api(app).enqueue('hist', { payload: 1 });
    const job = await enqueueAndClaim(app, 'hist', { payload: 2, priority: 9 });
    await api(app).ack(job.id, { lease_token: job.lease_token });
    await refreshLiveStats(database.db);
    await recordQueueHistory(database.db);

    const res = await api(app).call('GET', '/v1/queues/hist/history');
    expect(res.status).toBe(200);
    expect(res.body.queue).toBe('hist');
    expect(Date.parse(res.body.now)).toBeGreaterThan(Date.now() - 60_000);
    expect(res.body.samples).toEqual([
      {
        minute: expect.stringMatching(/:00\.000Z$/),
        at: expect.any(String),
        since: expect.any(String),
        scheduled: 0,
        ready: 1,
        claimed: 0,
        oldest_ready_age_ms: expect.any(Number),
        enqueued: 2,
        completed: 1,
        dead: 0,
        cancelled: 0,
        attempts_failed: 0,
      },
    ]);
  });

  it('leaves out samples older than the minutes asked for', async () => {
    await sql`UPDATE baton.queue_history SET minute = minute - interval '5 minutes' WHERE queue = 'hist'`.execute(
      database.db,
    );
    expect((await api(app).call('GET', '/v1/queues/hist/history?minutes=5')).body.samples).toHaveLength(0);
    expect((await api(app).call('GET', '/v1/queues/hist/history?minutes=6')).body.samples).toHaveLength(1);
  });

  it('404 for a queue that does not exist; 400 outside 1..1440 minutes', async () => {
    const missing = await api(app).call('GET', '/v1/queues/never-was/history');
    expect(missing.status).toBe(404);
    expect(missing.body.code).toBe('queue_not_found');
    for (const minutes of ['0', '1441', 'x']) {
      const bad = await api(app).call('GET', `/v1/queues/hist/history?minutes=${minutes}`);
      expect(bad.status, minutes).toBe(400);
      expect(bad.body.errors[0].field).toBe('minutes');
    }
  });
});

describe('GET /v1/whoami', () => {
  it('without keys configured: not authenticated, every scope', async () => {
    const res = await api(app).call('GET', '/v1/whoami');
    expect(res.body).toEqual({
      authenticated: false,
      name: null,
      scopes: ['producer', 'consumer', 'admin'],
      queue_limited: false,
    });
  });

  it('with keys: the presented key’s name and scopes, never its secret', async () => {
    const secret = 'whoami-secret';
    const keys = [
      { name: 'reader', sha256: sha256(secret).toString('hex'), scopes: ['consumer'], queues: ['a.*'] },
    ];
    const keyed = await createTestApp(database, { BATON_API_KEYS: JSON.stringify(keys) });
    try {
      const res = await keyed.inject({
        method: 'GET',
        url: '/v1/whoami',
        headers: { authorization: `Bearer ${secret}` },
      });
      expect(res.json()).toEqual({
        authenticated: true,
        name: 'reader',
        scopes: ['consumer'],
        queue_limited: true,
      });
      expect(res.body).not.toContain(secret);
      expect(res.body).not.toContain(keys[0]!.sha256);
      expect((await keyed.inject({ method: 'GET', url: '/v1/whoami' })).statusCode).toBe(401);
    } finally {
      await keyed.close();
    }
  });
});
