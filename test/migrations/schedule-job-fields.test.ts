import { sql } from 'kysely';
import { Migrator } from 'kysely/migration';
import { describe, expect, it } from 'vitest';
import { migrations } from '../../migrations/index.js';
import { createDatabase } from '../../src/db/database.js';
import { migrateToLatest } from '../../src/db/migrate.js';
import { noLog } from '../../src/logger.js';
import { applySchedulesFile, parseSchedules } from '../../src/schedules/file.js';
import { getSchedule } from '../../src/schedules/store.js';
import { createTestDatabase } from '../support/database.js';

/**
 * Upgrading to the schedules' job fields (migrations/0010_schedule_job_fields.ts): an existing
 * schedule keeps enqueueing what it did (every new field null), and one from BATON_SCHEDULES_FILE is
 * not reported as drifted because its definition grew five fields.
 */
const settings = { poolSize: 4, statementTimeoutMs: 30_000, connectTimeoutMs: 5_000 };

describe('upgrading schedules to job fields', () => {
  it('keeps existing schedules as they were, and file schedules undrifted', async () => {
    const database = await createTestDatabase({ migrated: false });
    const handle = createDatabase(database.url, settings, noLog, 'maintenance');
    try {
      const migrator = new Migrator({
        db: handle.db,
        provider: { getMigrations: async () => migrations },
        migrationTableSchema: 'baton',
      });
      expect((await migrator.migrateTo('0009_time_limits')).error).toBeUndefined();
      // A schedule the file set, with file_spec in the shape the code before this migration wrote.
      await sql`
        INSERT INTO baton.schedules (name, queue, cron, timezone, payload, priority, max_attempts, next_run_at)
        VALUES ('old', 'reports', '30 2 * * *', 'UTC', '{"v": 1}', 2, 3, now() + interval '1 hour')`.execute(
        handle.db,
      );
      await sql`
        UPDATE baton.schedules s SET file_spec = jsonb_build_object('queue', s.queue, 'cron', s.cron,
          'timezone', s.timezone, 'payload', s.payload, 'priority', s.priority, 'max_attempts', s.max_attempts,
          'overlap', s.overlap, 'catch_up', s.catch_up, 'paused', s.paused)`.execute(handle.db);

      expect((await migrateToLatest(handle.db)).applied).toContain('0010_schedule_job_fields');
      const row = await getSchedule(handle.db, 'old');
      expect(row).toMatchObject({
        priority: 2,
        max_attempts: 3,
        group_key: null,
        timeout_ms: null,
        expires_in_ms: null,
        unique_key: null,
        on_conflict: null,
        from_file: true,
        drifted: false,
      });
      // The same file at the next start finds it unchanged.
      const file = parseSchedules({
        schedules: {
          old: { queue: 'reports', cron: '30 2 * * *', payload: { v: 1 }, priority: 2, max_attempts: 3 },
        },
      });
      expect(await applySchedulesFile(handle.db, file, noLog, 1000)).toEqual({ old: 'unchanged' });
    } finally {
      await handle.close();
      await database.drop();
    }
  });

  it('refuses values outside the API’s ranges, and on_conflict without unique_key', async () => {
    const database = await createTestDatabase();
    const handle = createDatabase(database.url, settings, noLog, 'maintenance');
    try {
      const insert = (values: Record<string, unknown>) => {
        const columns = Object.keys(values);
        return sql`INSERT INTO baton.schedules (name, queue, cron, ${sql.join(columns.map((c) => sql.ref(c)))})
            VALUES ('x', 'q', '@daily', ${sql.join(columns.map((c) => values[c]))})`.execute(handle.db);
      };
      await expect(insert({ timeout_ms: 999 })).rejects.toThrow(/schedules_timeout_ms/);
      await expect(insert({ expires_in_ms: -1 })).rejects.toThrow(/schedules_expires_in_ms/);
      await expect(insert({ group_key: 'a b' })).rejects.toThrow(/schedules_group_format/);
      await expect(insert({ unique_key: '', on_conflict: 'keep' })).rejects.toThrow(/schedules_unique_key/);
      await expect(insert({ unique_key: 'k' })).rejects.toThrow(/schedules_on_conflict/);
      await expect(insert({ on_conflict: 'keep' })).rejects.toThrow(/schedules_on_conflict/);
      await expect(insert({ unique_key: 'k', on_conflict: 'merge' })).rejects.toThrow(
        /schedules_on_conflict/,
      );
    } finally {
      await handle.close();
      await database.drop();
    }
  });
});
