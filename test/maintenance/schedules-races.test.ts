import { sql } from 'kysely';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createDatabase } from '../../src/db/database.js';
import { noLog } from '../../src/logger.js';
import { type FireOptions, fireDueSchedules } from '../../src/schedules/fire.js';
import { createTestApp, useTestApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { api } from '../support/http.js';
import { freePort } from '../support/ports.js';
import { ServerProcess } from '../support/server-process.js';
import { until } from '../support/until.js';

/**
 * Exactly once under the races the issue names: two leaders at once, a leader killed in the middle
 * of a tick (a real server process, SIGKILLed while its transaction is held at a chosen point), and
 * replicas whose clocks disagree.
 */

const database = useTestDatabase();
const app = useTestApp(database);

const options = (over: Partial<FireOptions> = {}): FireOptions => ({
  enqueue: { autoCreate: { enabled: true, maxQueues: 1000 }, defaultMaxAttempts: 5 },
  graceMs: 60_000,
  batch: 100,
  ...over,
});

const jobKeys = async (queuePrefix: string) =>
  (
    await sql<{ key: string; n: number }>`
      SELECT idempotency_key AS key, count(*)::int AS n FROM baton.jobs
      WHERE queue LIKE ${`${queuePrefix}%`} GROUP BY idempotency_key ORDER BY 1`.execute(database.db)
  ).rows;

/** A schedule that owes exactly one occurrence, 2026-01-01T00:00Z (yearly: the next is 2027). */
async function oweNewYear(name: string, queue: string) {
  expect((await api(app).call('PUT', `/v1/schedules/${name}`, { queue, cron: '0 0 1 1 *' })).status).toBe(
    201,
  );
  await sql`UPDATE baton.schedules SET next_run_at = '2026-01-01T00:00:00Z' WHERE name = ${name}`.execute(
    database.db,
  );
}

/** The server process's session that waits on a lock (the leader, held mid-tick), once there is one. */
async function waitingLeaderPid(waitEvent: string): Promise<number> {
  let pid: number | undefined;
  await until(async () => {
    const { rows } = await sql<{ pid: number }>`
      SELECT pid FROM pg_stat_activity
      WHERE datname = current_database() AND application_name = 'baton-maintenance'
        AND wait_event_type = 'Lock' AND wait_event = ${waitEvent}`.execute(database.db);
    pid = rows[0]?.pid;
    return pid !== undefined;
  }, 30_000);
  return pid!;
}

const sessionGone = (pid: number) =>
  until(async () => {
    const { rows } = await sql`SELECT 1 FROM pg_stat_activity WHERE pid = ${pid}`.execute(database.db);
    return rows.length === 0;
  }, 30_000);

/** Whether another session holds the schedule's row (FOR UPDATE NOWAIT fails at once if so). */
async function rowHeld(name: string): Promise<boolean> {
  return database.db
    .transaction()
    .execute(async (trx) => {
      await sql`SELECT 1 FROM baton.schedules WHERE name = ${name} FOR UPDATE NOWAIT`.execute(trx);
      return false;
    })
    .catch((err: { code?: string }) => {
      if (err.code === '55P03') return true;
      throw err;
    });
}

async function startLeaderProcess(): Promise<ServerProcess> {
  return ServerProcess.start(
    { DATABASE_URL: database.url, BATON_TICK_MS: '500', BATON_SCHEDULE_INTERVAL_MS: '100' },
    await freePort(),
  );
}

/** A new leader in this process (an app taking part in election), until `done` holds. */
async function failOverTo(done: () => Promise<boolean>) {
  const next = await createTestApp(database, { BATON_MAINTENANCE: 'true', BATON_TICK_MS: '500' });
  try {
    await until(done, 20_000);
  } finally {
    await next.close();
  }
}

describe('schedules: exactly once', () => {
  afterEach(async () => {
    await sql`DELETE FROM baton.schedules`.execute(database.db);
  });

  it('two leaders at once (two pools, four loops): every occurrence becomes exactly one job', async () => {
    // 300 schedules over 7 queues, each owing 08:00, 08:01 and 08:02 (catch_up all): 900 occurrences.
    await sql`
      INSERT INTO baton.schedules (name, queue, cron, catch_up, next_run_at)
      SELECT 'two-' || g, 'two-q' || (g % 7), '* * * * *', 'all', '2026-01-01T08:00:00Z'
      FROM generate_series(1, 300) g`.execute(database.db);
    const other = createDatabase(
      database.url,
      { poolSize: 4, statementTimeoutMs: 30_000, connectTimeoutMs: 5_000 },
      noLog,
    );
    try {
      const at = options({ now: new Date('2026-01-01T08:02:30Z'), batch: 17 });
      const loop = async (db: typeof database.db) => {
        let enqueued = 0;
        for (;;) {
          const run = await fireDueSchedules(db, at);
          enqueued += run.outcomes.filter((o) => o.outcome === 'enqueued').reduce((a, o) => a + o.n, 0);
          if (run.schedules === 0) return enqueued;
        }
      };
      const counts = await Promise.all([
        loop(database.db),
        loop(other.db),
        loop(database.db),
        loop(other.db),
      ]);
      expect(counts.reduce((a, b) => a + b, 0)).toBe(900);
      // More than one loop did some of the work (else this would not be a race).
      expect(counts.filter((n) => n > 0).length).toBeGreaterThan(1);
    } finally {
      await other.close();
    }
    const keys = await jobKeys('two-q');
    expect(keys).toHaveLength(900);
    expect(keys.every((k) => k.n === 1)).toBe(true);
    const { rows } = await sql<{ n: number }>`
      SELECT count(*)::int AS n FROM baton.schedules WHERE next_run_at = '2026-01-01T08:03:00Z'`.execute(
      database.db,
    );
    expect(rows[0]!.n).toBe(300);
  });

  it('a leader killed between the read and the enqueue commits nothing; a second leader skips its rows meanwhile; the next leader enqueues once', {
    timeout: 90_000,
  }, async () => {
    await api(app).call('PUT', '/v1/queues/kill-read', {});
    await oweNewYear('kill-read', 'kill-read');
    // Hold the queue's row: the leader's enqueue (FOR KEY SHARE on it) waits here, after it has
    // read and locked the due schedule and before it has inserted anything.
    const blocker = await database.pool.connect();
    let leader: ServerProcess | undefined;
    try {
      await blocker.query('BEGIN');
      await blocker.query(`SELECT 1 FROM baton.queues WHERE name = 'kill-read' FOR UPDATE`);
      leader = await startLeaderProcess();
      const pid = await waitingLeaderPid('transactionid');
      expect(await rowHeld('kill-read')).toBe(true);

      // Two leaders for a moment: another one now skips the held row and does the rest.
      await oweNewYear('kill-read-other', 'kill-read-other');
      const second = await fireDueSchedules(database.db, options());
      expect(second.outcomes).toEqual([{ queue: 'kill-read-other', outcome: 'enqueued', n: 1 }]);

      leader.signal('SIGKILL');
      await leader.exited;
      await blocker.query('COMMIT');
      // The dead leader's session runs on until it finds its client gone, then rolls back.
      await sessionGone(pid);
    } finally {
      blocker.release();
      leader?.signal('SIGKILL');
    }
    expect(await jobKeys('kill-read')).toEqual([
      { key: 'schedule:kill-read-other:2026-01-01T00:00:00.000Z', n: 1 },
    ]);
    expect((await api(app).call('GET', '/v1/schedules/kill-read')).body.next_run_at).toBe(
      '2026-01-01T00:00:00.000Z',
    );

    await failOverTo(async () => (await jobKeys('kill-read')).length === 2);
    expect(await jobKeys('kill-read')).toEqual([
      { key: 'schedule:kill-read-other:2026-01-01T00:00:00.000Z', n: 1 },
      { key: 'schedule:kill-read:2026-01-01T00:00:00.000Z', n: 1 },
    ]);
    expect((await api(app).call('GET', '/v1/schedules/kill-read')).body.next_run_at).toBe(
      '2027-01-01T00:00:00.000Z',
    );
  });

  it('a leader killed between the enqueue and the advance: its inserted job goes with it; the next leader enqueues once', {
    timeout: 90_000,
  }, async () => {
    await oweNewYear('kill-advance', 'kill-advance');
    // Hold the advance: a trigger on the schedule's UPDATE waits for an advisory lock this test holds.
    await sql`
      CREATE FUNCTION baton.test_hold_advance() RETURNS trigger LANGUAGE plpgsql AS
      $$ BEGIN PERFORM pg_advisory_xact_lock(4242); RETURN NEW; END $$`.execute(database.db);
    await sql`
      CREATE TRIGGER test_hold_advance BEFORE UPDATE ON baton.schedules
      FOR EACH ROW EXECUTE FUNCTION baton.test_hold_advance()`.execute(database.db);
    const blocker = await database.pool.connect();
    let leader: ServerProcess | undefined;
    try {
      await blocker.query('SELECT pg_advisory_lock(4242)');
      leader = await startLeaderProcess();
      const pid = await waitingLeaderPid('advisory');
      // It is past the enqueue: its session has written to baton.jobs (not yet visible to anyone).
      const { rows } = await sql`
        SELECT 1 FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
        WHERE l.pid = ${pid} AND c.relname = 'jobs' AND l.mode = 'RowExclusiveLock'`.execute(database.db);
      expect(rows).toHaveLength(1);
      leader.signal('SIGKILL');
      await leader.exited;
      await blocker.query('SELECT pg_advisory_unlock(4242)');
      await sessionGone(pid);
    } finally {
      blocker.release();
      leader?.signal('SIGKILL');
      await sql`DROP TRIGGER IF EXISTS test_hold_advance ON baton.schedules`.execute(database.db);
      await sql`DROP FUNCTION IF EXISTS baton.test_hold_advance()`.execute(database.db);
    }
    expect(await jobKeys('kill-advance')).toEqual([]);
    await failOverTo(async () => (await jobKeys('kill-advance')).length === 1);
    expect(await jobKeys('kill-advance')).toEqual([
      { key: 'schedule:kill-advance:2026-01-01T00:00:00.000Z', n: 1 },
    ]);
  });

  it('replicas whose clocks are hours apart agree on what is due: the database’s clock decides', async () => {
    await api(app).call('PUT', '/v1/schedules/clock-due', { queue: 'clock-due', cron: '0 0 1 1 *' });
    await api(app).call('PUT', '/v1/schedules/clock-later', { queue: 'clock-later', cron: '0 0 1 1 *' });
    await sql`UPDATE baton.schedules SET next_run_at = now() - interval '1 second' WHERE name = 'clock-due'`.execute(
      database.db,
    );
    await sql`UPDATE baton.schedules SET next_run_at = now() + interval '1 hour' WHERE name = 'clock-later'`.execute(
      database.db,
    );
    vi.useFakeTimers({ toFake: ['Date'] });
    try {
      // A replica three hours behind still sees clock-due as due...
      vi.setSystemTime(Date.now() - 3 * 3_600_000);
      const behind = await fireDueSchedules(database.db, options());
      // ...and one three hours ahead does not think clock-later is.
      vi.setSystemTime(Date.now() + 6 * 3_600_000);
      const ahead = await fireDueSchedules(database.db, options());
      expect(behind.outcomes).toEqual([{ queue: 'clock-due', outcome: 'enqueued', n: 1 }]);
      expect(ahead.schedules).toBe(0);
    } finally {
      vi.useRealTimers();
    }
    expect(await jobKeys('clock-')).toHaveLength(1);
  });
});
