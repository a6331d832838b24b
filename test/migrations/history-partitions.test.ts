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
 * An existing database upgrades in place to day-partitioned history
 * (migrations/0014_history_partitions.ts): every finished job lands in its class and day, keeps its
 * id and columns, reads by id and in lists, and the migration goes back down as well.
 */
const settings = { poolSize: 4, statementTimeoutMs: 30_000, connectTimeoutMs: 5_000 };

describe('upgrading to partitioned history', () => {
  it('moves every finished job into its day, and back down', async () => {
    const database = await createTestDatabase({ migrated: false });
    const handle = createDatabase(database.url, settings, noLog, 'maintenance');
    const migrator = new Migrator({
      db: handle.db,
      provider: { getMigrations: async () => migrations },
      migrationTableSchema: 'baton',
    });
    try {
      const before = await migrator.migrateTo('0013_unique_key_generation');
      expect(before.error).toBeUndefined();
      await sql`INSERT INTO baton.queues (name, auto_created) VALUES ('up', false)`.execute(handle.db);
      await sql`
        INSERT INTO baton.job_history (id, queue, state, priority, run_at, attempts, max_attempts, dead_reason,
                                       created_at, finished_at, payload, result, group_key)
        VALUES (20, 'up', 'completed', 0, now(), 1, 5, NULL, now(), now(), '{"n":20}', '{"r":1}', ''),
               (21, 'up', 'dead', 0, now(), 5, 5, 'attempts_exhausted', now(), now() - interval '5 days', '{"n":21}', NULL, 'g'),
               (22, 'up', 'cancelled', 0, now(), 0, 5, NULL, now(), '2020-01-01T12:00:00Z', '{"n":22}', NULL, '')`.execute(
        handle.db,
      );
      const after = await migrateToLatest(handle.db);
      expect(after.applied).toContain('0014_history_partitions');

      const { rows } = await sql<{ id: string; part: string }>`
        SELECT id::text, tableoid::regclass::text AS part FROM baton.job_history ORDER BY id`.execute(
        handle.db,
      );
      const day = (ms: number) => new Date(Date.now() - ms).toISOString().slice(0, 10).replaceAll('-', '');
      expect(rows).toEqual([
        { id: '20', part: `baton.job_history_done_${day(0)}` },
        { id: '21', part: `baton.job_history_dead_${day(5 * 86_400_000)}` },
        { id: '22', part: 'baton.job_history_done_20200101' },
      ]);
      const indexes = await sql<{ indexname: string }>`
        SELECT indexname FROM pg_indexes WHERE schemaname = 'baton' AND tablename = 'job_history' ORDER BY 1`.execute(
        handle.db,
      );
      expect(indexes.rows.map((r) => r.indexname)).toEqual([
        'job_history_group_idx',
        'job_history_pkey',
        'job_history_queue_state_finished_idx',
      ]);
    } finally {
      await handle.close();
    }

    const app = await buildApp({ config: testConfig(), databaseUrl: database.url });
    await app.ready();
    try {
      const got = await Promise.all(['20', '21', '22'].map((id) => api(app).get(id)));
      expect(got.map((r) => r.body.state)).toEqual(['completed', 'dead', 'cancelled']);
      expect(got[0]!.body).toMatchObject({ result: { r: 1 }, payload: { n: 20 } });
      const dead = await api(app).call('GET', '/v1/queues/up/jobs?state=dead');
      expect(dead.body.jobs.map((j: { id: string }) => j.id)).toEqual(['21']);
    } finally {
      await app.close();
    }

    const down = createDatabase(database.url, settings, noLog, 'maintenance');
    try {
      const back = await new Migrator({
        db: down.db,
        provider: { getMigrations: async () => migrations },
        migrationTableSchema: 'baton',
      }).migrateTo('0013_unique_key_generation');
      expect(back.error).toBeUndefined();
      const { rows } = await sql<{ n: number; kind: string }>`
        SELECT (SELECT count(*)::int FROM baton.job_history) AS n,
               (SELECT relkind::text FROM pg_class WHERE oid = 'baton.job_history'::regclass) AS kind`.execute(
        down.db,
      );
      expect(rows[0]).toEqual({ n: 3, kind: 'r' });
    } finally {
      await down.close();
      await database.drop();
    }
  });
});
