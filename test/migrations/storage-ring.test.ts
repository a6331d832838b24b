import { sql } from 'kysely';
import { Migrator } from 'kysely/migration';
import { describe, expect, it } from 'vitest';
import { migrations } from '../../migrations/index.js';
import { buildApp } from '../../src/app.js';
import { createDatabase } from '../../src/db/database.js';
import { migrateToLatest } from '../../src/db/migrate.js';
import { noLog } from '../../src/logger.js';
import { testConfig } from '../support/app.js';
import { createTestDatabase } from '../support/database.js';
import { api } from '../support/http.js';

/**
 * An existing database upgrades in place to the ring (migrations/0004_storage_ring.ts) with its live
 * jobs: every state kept, a worker holding a lease acks it with its old token, scheduled jobs wait
 * where they should, and new ids continue above every id in use.
 */
const settings = { poolSize: 4, statementTimeoutMs: 30_000, connectTimeoutMs: 5_000 };

describe('upgrading to the ring', () => {
  it('keeps jobs in every state, their leases and their ids', async () => {
    const database = await createTestDatabase({ migrated: false });
    const handle = createDatabase(database.url, settings, noLog, 'maintenance');
    try {
      const migrator = new Migrator({
        db: handle.db,
        provider: { getMigrations: async () => migrations },
        migrationTableSchema: 'baton',
      });
      const before = await migrator.migrateTo('0003_idempotent_ack');
      expect(before.error).toBeUndefined();

      // The old layout: one table of live jobs (ids from its identity), history, idempotency keys.
      await sql`INSERT INTO baton.queues (name, auto_created) VALUES ('up', false)`.execute(handle.db);
      await sql`
        INSERT INTO baton.jobs (id, queue, state, priority, run_at, attempts, max_attempts, lease_token, lease_ms,
                                lease_expires_at, claimed_at, worker_id, idempotency_key, payload)
        VALUES
          (10, 'up', 'ready', 5, now() - interval '1 minute', 0, 5, NULL, NULL, NULL, NULL, NULL, 'k-ready', '{"n":10}'),
          (11, 'up', 'claimed', 0, now() - interval '1 minute', 1, 5, '11111111-1111-4111-8111-111111111111', 60000,
           now() + interval '1 minute', now(), 'old-worker', NULL, '{"n":11}'),
          (12, 'up', 'scheduled', 0, now() + interval '1 hour', 1, 5, NULL, NULL, NULL, now() - interval '1 minute',
           'old-worker', NULL, '{"n":12}'),
          (13, 'up', 'scheduled', 0, now() - interval '1 second', 0, 5, NULL, NULL, NULL, NULL, NULL, NULL, '{"n":13}')`.execute(
        handle.db,
      );
      await sql`
        INSERT INTO baton.job_history (id, queue, state, priority, run_at, attempts, max_attempts, dead_reason,
                                       created_at, finished_at, payload)
        VALUES (20, 'up', 'completed', 0, now(), 1, 5, NULL, now(), now(), '{"n":20}'),
               (21, 'up', 'dead', 0, now(), 5, 5, 'attempts_exhausted', now(), now(), '{"n":21}'),
               (22, 'up', 'cancelled', 0, now(), 0, 5, NULL, now(), now(), '{"n":22}')`.execute(handle.db);
      await sql`
        INSERT INTO baton.idempotency_keys (queue, key, job_id, expires_at)
        VALUES ('up', 'k-ready', 10, now() + interval '1 hour'), ('up', 'k-far', 30, now() + interval '1 hour')`.execute(
        handle.db,
      );

      const after = await migrateToLatest(handle.db);
      expect(after.applied).toContain('0004_storage_ring');
    } finally {
      await handle.close();
    }

    const app = await buildApp({ config: testConfig(), databaseUrl: database.url });
    await app.ready();
    try {
      const states = await Promise.all(
        ['10', '11', '12', '13', '20', '21', '22'].map((id) => api(app).get(id)),
      );
      expect(states.map((r) => r.body.state)).toEqual([
        'ready',
        'claimed',
        'scheduled',
        'scheduled',
        'completed',
        'dead',
        'cancelled',
      ]);
      expect(states[1]!.body).toMatchObject({ worker_id: 'old-worker', payload: { n: 11 } });

      // The worker holding job 11's lease from before the upgrade renews and acks it as usual.
      const token = '11111111-1111-4111-8111-111111111111';
      expect((await api(app).renew('11', { lease_token: token })).status).toBe(200);
      expect((await api(app).ack('11', { lease_token: token })).body.state).toBe('completed');

      // The ready job is claimable; the idempotency key still answers it.
      const again = await api(app).enqueue('up', { payload: 'dup', idempotency_key: 'k-ready' });
      expect(again).toMatchObject({ status: 200, body: { id: '10' } });
      const [claimed] = (await api(app).claim('up')).body.jobs;
      expect(claimed).toMatchObject({ id: '10', payload: { n: 10 } });

      // New ids continue above every id in use (the live table, history and reserved keys).
      const fresh = await api(app).enqueue('up', { payload: 'new' });
      expect(Number(fresh.body.id)).toBeGreaterThan(30);

      const placed = await sql<{ ring: number; scheduled: number }>`
        SELECT (SELECT count(*)::int FROM baton.jobs) AS ring,
               (SELECT count(*)::int FROM baton.scheduled_jobs) AS scheduled`.execute(app.db);
      expect(placed.rows[0]).toEqual({ ring: 2, scheduled: 2 });
    } finally {
      await app.close();
      await database.drop();
    }
  });
});

describe('downgrading from the ring', () => {
  it('puts ready, claimed and scheduled jobs back into one table', async () => {
    const database = await createTestDatabase({ migrated: false });
    const handle = createDatabase(database.url, settings, noLog, 'maintenance');
    try {
      await migrateToLatest(handle.db);
      await sql`INSERT INTO baton.queues (name, auto_created) VALUES ('down', false)`.execute(handle.db);
      await sql`
        INSERT INTO baton.jobs (slot, id, queue, state, run_at, max_attempts, payload)
        VALUES (baton.job_slot(5), 5, 'down', 'ready', now(), 5, '1')`.execute(handle.db);
      await sql`
        INSERT INTO baton.scheduled_jobs (id, queue, run_at, max_attempts, payload)
        VALUES (6, 'down', now() + interval '1 hour', 5, '2')`.execute(handle.db);
      const migrator = new Migrator({
        db: handle.db,
        provider: { getMigrations: async () => migrations },
        migrationTableSchema: 'baton',
      });
      const result = await migrator.migrateTo('0003_idempotent_ack');
      expect(result.error).toBeUndefined();
      const { rows } = await sql<{ id: string; state: string }>`
        SELECT id::text, state FROM baton.jobs ORDER BY id`.execute(handle.db);
      expect(rows).toEqual([
        { id: '5', state: 'ready' },
        { id: '6', state: 'scheduled' },
      ]);
      const next = await sql<{ id: string }>`
        INSERT INTO baton.jobs (queue, state, run_at, max_attempts, payload)
        VALUES ('down', 'ready', now(), 5, '3') RETURNING id::text`.execute(handle.db);
      expect(Number(next.rows[0]!.id)).toBeGreaterThan(6);
    } finally {
      await handle.close();
      await database.drop();
    }
  });
});
