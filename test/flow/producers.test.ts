import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BatonApp } from '../../src/app.js';
import { createTestApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { api } from '../support/http.js';

/**
 * The seed lesson of ../shared/reference (000–002): an enqueue must not write or lock a shared
 * per-queue or per-group row, or producers queue up behind each other. Sixteen producers on four
 * replicas enqueue single jobs into one group while a sampler watches pg_locks and
 * pg_stat_activity for anyone waiting on a lock.
 */
const database = useTestDatabase();
const replicas: BatonApp[] = [];
beforeAll(async () => {
  for (let i = 0; i < 4; i++) replicas.push(await createTestApp(database));
});
afterAll(async () => {
  await Promise.all(replicas.map((app) => app.close()));
});

describe('producers on one group', () => {
  it('never wait on a row lock, from the first grouped enqueue on', async () => {
    const q = 'pr-hot';
    // Limits and an override too: they must not put anything on the enqueue path.
    await api(replicas[0]!).call('PUT', `/v1/queues/${q}`, {
      concurrency_limit: 10,
      group_rate_limit: { limit: 5, period_ms: 1000 },
    });
    await api(replicas[0]!).call('PUT', `/v1/queues/${q}/groups/hot`, { weight: 2 });
    let done = false;
    const waits: unknown[] = [];
    let samples = 0;
    const sampler = (async () => {
      while (!done) {
        const { rows } = await sql`
          SELECT l.locktype, l.mode, l.classid, l.objid, a.query FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
          WHERE NOT l.granted AND a.datname = current_database()
            -- Waiting for a row is waiting on its tuple or on the transaction that holds it; relation
            -- and advisory locks are what a shared per-queue lock would be. (Not counted: table
            -- extension, which every insert into a growing table may briefly wait for, and NOTIFY's
            -- commit-time lock, which the notifier coalesces to a few a second.)
            AND l.locktype IN ('tuple', 'transactionid', 'relation', 'advisory')`.execute(database.db);
        waits.push(...rows);
        samples++;
      }
    })();
    let sent = 0;
    const errors: unknown[] = [];
    const deadline = Date.now() + 2000;
    const producer = async (app: BatonApp) => {
      while (Date.now() < deadline) {
        const res = await api(app).enqueue(q, { payload: { n: sent }, group: 'hot' });
        if (res.status !== 201) errors.push(res.body);
        sent++;
      }
    };
    await Promise.all(replicas.flatMap((app) => Array.from({ length: 4 }, () => producer(app))));
    done = true;
    await sampler;
    expect(errors).toEqual([]);
    expect(samples).toBeGreaterThan(50);
    expect(sent).toBeGreaterThan(100);
    expect(waits.slice(0, 3)).toEqual([]); // the first few, if any, say who waited on what
    const { rows } = await sql<{ n: number }>`
      SELECT count(*)::int AS n FROM baton.jobs WHERE queue = ${q} AND group_key = 'hot'`.execute(
      database.db,
    );
    expect(rows[0]!.n).toBe(sent);
    expect((await api(replicas[0]!).call('GET', `/v1/queues/${q}`)).body.grouped).toBe(true);
  });
});
