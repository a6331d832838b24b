import type pg from 'pg';
import { describe, expect, it } from 'vitest';
import { createTestApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { api } from '../support/http.js';
import { metricValue } from '../support/prometheus.js';

const database = useTestDatabase();

describe('load shedding', () => {
  it('answers 503 with Retry-After while queries queue for the pool; health checks still answer', async () => {
    const app = await createTestApp(database, { BATON_DB_POOL_SIZE: '2', BATON_SHED_POOL_WAITING: '1' });
    const held: pg.PoolClient[] = [];
    try {
      // Take both pool connections, then queue two requests behind them.
      held.push(await app.dbPool.connect(), await app.dbPool.connect());
      // Two queues, so the two requests do not share one grouped statement.
      const queued = [api(app).enqueue('shed-a', { payload: 1 }), api(app).enqueue('shed-b', { payload: 2 })];
      for (let i = 0; i < 100 && app.dbPool.waitingCount < 2; i++)
        await new Promise((r) => setTimeout(r, 10));
      expect(app.dbPool.waitingCount).toBe(2);

      const shed = await api(app).enqueue('shed', { payload: 3 });
      expect(shed.status).toBe(503);
      expect(shed.headers['retry-after']).toBe('1');
      expect(shed.body).toMatchObject({
        code: 'unavailable',
        detail: expect.stringContaining('waiting for a database connection'),
      });
      expect((await app.inject({ method: 'GET', url: '/healthz' })).statusCode).toBe(200);

      for (const client of held.splice(0)) client.release();
      expect((await Promise.all(queued)).map((r) => r.status)).toEqual([201, 201]);
      expect((await api(app).enqueue('shed', { payload: 4 })).status).toBe(201);
      const text = (await app.inject({ method: 'GET', url: '/metrics' })).body;
      expect(metricValue(text, 'baton_requests_shed_total', { reason: 'pool' })).toBe(1);
    } finally {
      for (const client of held) client.release();
      await app.close();
    }
  });

  it('answers 503 while the event loop lags, and recovers when it does not', async () => {
    const app = await createTestApp(database, { BATON_SHED_EVENT_LOOP_DELAY_MS: '250' });
    try {
      expect((await api(app).enqueue('lag', { payload: 1 })).status).toBe(201);
      // Saturate the event loop the way a CPU-bound burst does: stalls of 600 ms with short breaks,
      // for as long as it takes to see a request shed. A single stall would leave only a short
      // window in which a shed is expected, and a slow request on a busy machine could miss it.
      let saturating = true;
      const stall = () => {
        if (!saturating) return;
        const until = Date.now() + 600;
        while (Date.now() < until) {
          // Block.
        }
        setTimeout(stall, 30);
      };
      setTimeout(stall, 0);
      let shed: Awaited<ReturnType<ReturnType<typeof api>['enqueue']>> | undefined;
      try {
        for (let i = 0; i < 100 && !shed; i++) {
          const res = await api(app).enqueue('lag', { payload: 2 });
          if (res.status === 503) shed = res;
          else await new Promise((r) => setTimeout(r, 20));
        }
        expect(shed?.body.detail).toMatch(/event loop lag \d+ ms/);
        expect(shed?.headers['retry-after']).toBe('1');
        // Probes still answer while the loop lags.
        expect((await app.inject({ method: 'GET', url: '/readyz' })).statusCode).toBe(200);
      } finally {
        saturating = false;
      }
      // ...and once the loop runs freely again, they are served.
      let status = 0;
      for (let i = 0; i < 60 && status !== 201; i++) {
        await new Promise((r) => setTimeout(r, 100));
        status = (await api(app).enqueue('lag', { payload: 3 })).status;
      }
      expect(status).toBe(201);
    } finally {
      await app.close();
    }
  });
});
