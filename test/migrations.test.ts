import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { migrations } from '../migrations/index.js';
import { createDatabase } from '../src/db/database.js';
import { migrateToLatest, pendingMigrations } from '../src/db/migrate.js';
import { FINISHED_STATES, LIVE_STATES } from '../src/job-states.js';
import { IDS_PER_SLOT, RING_SLOTS, slotsOf } from '../src/jobs/ring.js';
import { noLog } from '../src/logger.js';
import { createTestDatabase, useTestDatabase } from './support/database.js';

const quiet = noLog;
const settings = { poolSize: 4, statementTimeoutMs: 30_000, connectTimeoutMs: 5_000 };

describe('migrations', () => {
  it('apply to an empty database and are idempotent on a second run', async () => {
    const empty = await createTestDatabase({ migrated: false });
    const handle = createDatabase(empty.url, settings, quiet);
    try {
      const all = Object.keys(migrations);
      expect(all.slice(0, 4)).toEqual([
        '0001_initial',
        '0002_queue_stats',
        '0003_idempotent_ack',
        '0004_storage_ring',
      ]);
      expect(await pendingMigrations(handle.db)).toEqual(all);
      const first = await migrateToLatest(handle.db);
      expect(first.applied).toEqual(all);
      const second = await migrateToLatest(handle.db);
      expect(second.applied).toEqual([]);
      expect(await pendingMigrations(handle.db)).toEqual([]);
      const tables = await sql<{ tablename: string }>`
        SELECT tablename FROM pg_tables WHERE schemaname = 'baton' ORDER BY 1`.execute(handle.db);
      expect(tables.rows.map((r) => r.tablename)).toEqual(
        expect.arrayContaining([
          'idempotency_keys',
          'job_history',
          'jobs',
          'jobs_0',
          'leader',
          'queues',
          'scheduled_jobs',
          'schedules',
        ]),
      );
    } finally {
      await handle.close();
      await empty.drop();
    }
  });

  it('is safe with several runners starting at once', async () => {
    const empty = await createTestDatabase({ migrated: false });
    const handles = Array.from({ length: 4 }, () => createDatabase(empty.url, settings, quiet));
    try {
      const results = await Promise.all(handles.map((h) => migrateToLatest(h.db)));
      // Exactly one runner applied the migration; the others found nothing to do.
      expect(results.map((r) => r.applied.length).sort()).toEqual([0, 0, 0, Object.keys(migrations).length]);
      expect(await pendingMigrations(handles[0]!.db)).toEqual([]);
    } finally {
      await Promise.all(handles.map((h) => h.close()));
      await empty.drop();
    }
  });

  describe('schema', () => {
    const database = useTestDatabase();

    async function checkConstraint(name: string): Promise<string> {
      const r = await sql<{ def: string }>`
        SELECT pg_get_constraintdef(oid) AS def FROM pg_constraint WHERE conname = ${name}`.execute(
        database.db,
      );
      return r.rows[0]!.def;
    }

    it('enforces exactly the job states declared in src/jobs/states.ts', async () => {
      // The ring holds ready and claimed jobs; scheduled and waiting ones have a table each.
      const ring = await checkConstraint('jobs_state');
      const finished = await checkConstraint('job_history_state');
      const quoted = (def: string) => [...def.matchAll(/'([a-z_]+)'/g)].map((m) => m[1]).sort();
      expect([...quoted(ring), 'scheduled', 'waiting'].sort()).toEqual([...LIVE_STATES].sort());
      expect(quoted(finished)).toEqual([...FINISHED_STATES].sort());
    });

    it('rejects a state outside the lifecycle', async () => {
      await database.db.insertInto('baton.queues').values({ name: 'q', auto_created: false }).execute();
      await expect(
        sql`INSERT INTO baton.jobs (slot, id, queue, state, run_at, max_attempts, payload)
            VALUES (0, 1, 'q', 'running', now(), 1, '{}')`.execute(database.db),
      ).rejects.toThrow(/jobs_state/);
    });

    it('agrees with src/jobs/ring.ts on the ring: slots, ids per slot, one partition per slot', async () => {
      const { rows } = await sql<{ partitions: number; first: number; second: number; wrap: number }>`
        SELECT (SELECT count(*)::int FROM pg_inherits WHERE inhparent = 'baton.jobs'::regclass) AS partitions,
               baton.job_slot(${IDS_PER_SLOT - 1}) AS first, baton.job_slot(${IDS_PER_SLOT}) AS second,
               baton.job_slot(${IDS_PER_SLOT * RING_SLOTS}) AS wrap`.execute(database.db);
      expect(rows[0]).toEqual({ partitions: RING_SLOTS, first: 0, second: 1, wrap: 0 });
      // slotsOf (the batch ack's partitions) computes baton.job_slot in the server.
      const ids = [
        '1',
        String(IDS_PER_SLOT * 3 + 7),
        String(IDS_PER_SLOT * RING_SLOTS * 5 + IDS_PER_SLOT * 6),
        '9007199254740993',
      ];
      const inSql = await sql<{ slot: number }>`
        SELECT DISTINCT baton.job_slot(x) AS slot FROM unnest(${ids}::bigint[]) AS x ORDER BY 1`.execute(
        database.db,
      );
      expect([...slotsOf(ids)].sort((a, b) => a - b)).toEqual(inSql.rows.map((r) => r.slot));
    });

    it('gives the ring a fillfactor below 100 and a ready-only claim index', async () => {
      const opts = await sql<{ reloptions: string[] }>`
        SELECT reloptions FROM pg_class WHERE oid = 'baton.jobs_0'::regclass`.execute(database.db);
      const fillfactor = Number(
        opts.rows[0]!.reloptions.find((o) => o.startsWith('fillfactor='))!.split('=')[1],
      );
      expect(fillfactor).toBeLessThan(100);
      const idx = await sql<{ def: string }>`
        SELECT pg_get_indexdef('baton.jobs_ready_idx'::regclass) AS def`.execute(database.db);
      expect(idx.rows[0]!.def).toMatch(/WHERE \(state = 'ready'::text\)/);
    });

    it('keeps lease_expires_at and lease_token out of every index (renewals stay HOT)', async () => {
      const r = await sql<{ def: string }>`
        SELECT pg_get_indexdef(indexrelid) AS def FROM pg_index
        WHERE indrelid IN ('baton.jobs'::regclass, 'baton.jobs_0'::regclass)`.execute(database.db);
      for (const { def } of r.rows) expect(def).not.toMatch(/lease_/);
    });
  });
});
