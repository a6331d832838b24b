import { sql } from 'kysely';
import type { Db } from '../db/database.js';
import type { Log } from '../logger.js';
import type { Metrics } from '../metrics/metrics.js';
import type { Duty } from './duty.js';

/**
 * Vacuum: keep dead rows in the live table from slowing claims down.
 *
 * Every claim and every ack leaves a dead row version in baton.jobs and a dead entry at the head of the
 * ready index, exactly where the next claim starts reading. Autovacuum removes them, but only when its
 * launcher next looks at this database: `autovacuum_naptime` is server-wide (60 s by default) and Baton
 * cannot change it. On a busy queue a minute of churn is tens of thousands of dead entries, and claims
 * read several times the buffers they read on a vacuumed table (docs/benchmarks.md, "Results against
 * the targets", the churn row). So the leader checks PostgreSQL's own count of dead rows every tick and
 * runs VACUUM on the live table when it passes a threshold. The live table is small by design (finished
 * jobs live in job_history), so this is cheap; the history table is left to autovacuum, since nothing
 * hot reads past its dead rows.
 *
 * `VACUUM (SKIP_LOCKED)`: if autovacuum (or another leader's vacuum) is already at work on the table,
 * this run skips instead of queueing behind it. A role that does not own the table gets a warning from
 * PostgreSQL instead of a vacuum; that too is reported as `skipped`. VACUUM takes only a SHARE UPDATE
 * EXCLUSIVE lock, which blocks no claim, enqueue or ack.
 *
 * Vacuum cannot remove a dead row that a still-open transaction might see: one idle session in
 * the database with an open transaction holds back every table in it (docs/adr/0012-maintenance-leader.md).
 * So this duty also reports the oldest open transaction, and says so in the log when dead rows
 * survived a vacuum. The numbers come from pg_stat_user_tables and pg_stat_activity: they lag writes
 * by up to a second, and other roles' sessions are visible only to a role with pg_read_all_stats.
 */

export type VacuumOutcome = 'vacuumed' | 'noop' | 'skipped';

export interface VacuumResult {
  outcome: VacuumOutcome;
  /** Dead row versions in baton.jobs when the run began. */
  deadRows: number;
  /** Dead row versions left after a vacuum (0 when none ran): held back by an open transaction. */
  remaining: number;
  /** Age of the oldest open transaction in this database (holding a snapshot), other than this one. */
  oldestTransactionSeconds: number;
  /** That transaction's backend, for the operator who has to find it. */
  oldestTransaction: { pid: number; application_name: string; state: string } | null;
}

interface TableStats {
  live: number;
  dead: number;
  vacuums: number;
}

async function jobsTableStats(db: Db): Promise<TableStats> {
  const { rows } = await sql<TableStats>`
    SELECT coalesce(sum(n_live_tup), 0)::float8 AS live, coalesce(sum(n_dead_tup), 0)::float8 AS dead,
           coalesce(sum(vacuum_count + autovacuum_count), 0)::float8 AS vacuums
    FROM pg_stat_user_tables
    WHERE relid IN (SELECT inhrelid FROM pg_inherits WHERE inhparent = 'baton.jobs'::regclass)
       OR relid = 'baton.scheduled_jobs'::regclass`.execute(db);
  return rows[0] ?? { live: 0, dead: 0, vacuums: 0 };
}

/**
 * The oldest transaction in this database that holds back vacuum: a session with a snapshot
 * (backend_xmin), or a prepared transaction, which holds one until it is committed or rolled back.
 */
async function oldestTransaction(
  db: Db,
): Promise<Pick<VacuumResult, 'oldestTransactionSeconds' | 'oldestTransaction'>> {
  const { rows } = await sql<{
    seconds: number;
    pid: number | null;
    application_name: string | null;
    state: string | null;
  }>`
    SELECT extract(epoch FROM clock_timestamp() - o.started)::float8 AS seconds, o.pid, o.application_name, o.state
    FROM (
      SELECT xact_start AS started, pid, application_name, state FROM pg_stat_activity
      WHERE datname = current_database() AND backend_xmin IS NOT NULL AND pid <> pg_backend_pid()
        AND xact_start IS NOT NULL
      UNION ALL
      SELECT prepared, NULL, 'prepared transaction ' || gid, 'prepared' FROM pg_prepared_xacts
      WHERE database = current_database()
    ) o
    ORDER BY o.started LIMIT 1`.execute(db);
  const row = rows[0];
  if (!row) return { oldestTransactionSeconds: 0, oldestTransaction: null };
  return {
    oldestTransactionSeconds: Math.max(0, row.seconds),
    oldestTransaction: {
      pid: row.pid ?? 0,
      application_name: row.application_name ?? '',
      state: row.state ?? '',
    },
  };
}

/**
 * Vacuum baton.jobs when its dead rows reach `deadRows`, or a tenth of its live rows if that is more
 * (so a table with a huge scheduled backlog is not re-scanned for a comparatively tiny gain).
 */
export async function vacuumLiveJobs(db: Db, deadRows: number): Promise<VacuumResult> {
  const before = await jobsTableStats(db);
  const oldest = await oldestTransaction(db);
  const due = deadRows > 0 && before.dead >= Math.max(deadRows, before.live / 10);
  if (!due) return { outcome: 'noop', deadRows: before.dead, remaining: 0, ...oldest };

  // No parameters, so node-postgres sends it as a simple query: VACUUM cannot run in a transaction
  // block, and the pool's connections are in none between statements.
  await sql`VACUUM (SKIP_LOCKED) baton.jobs, baton.scheduled_jobs`.execute(db);
  const after = await jobsTableStats(db);
  // A skipped VACUUM only warns; the table's vacuum count is how to tell it did not run.
  const outcome: VacuumOutcome = after.vacuums > before.vacuums ? 'vacuumed' : 'skipped';
  return {
    outcome,
    deadRows: before.dead,
    remaining: outcome === 'vacuumed' ? after.dead : 0,
    ...oldest,
  };
}

export class VacuumDuty implements Duty<VacuumResult> {
  readonly name = 'vacuum';

  constructor(
    private readonly db: Db,
    private readonly metrics: Metrics,
    private readonly log: Log,
    private readonly tickMs: number,
    private readonly deadRows: number,
  ) {}

  async runOnce(): Promise<VacuumResult> {
    const result = await vacuumLiveJobs(this.db, this.deadRows);
    this.metrics.vacuums.inc({ outcome: result.outcome });
    this.metrics.liveTableDeadRows.set(result.outcome === 'vacuumed' ? result.remaining : result.deadRows);
    this.metrics.oldestTransaction.set(result.oldestTransactionSeconds);
    if (result.outcome === 'vacuumed' && result.remaining >= this.deadRows) {
      this.log.warn(
        {
          dead_rows: result.remaining,
          oldest_transaction_seconds: Math.round(result.oldestTransactionSeconds),
          oldest_transaction: result.oldestTransaction,
        },
        'vacuum could not remove dead rows of baton.jobs: an open transaction still holds them, and claims slow down until it ends',
      );
    }
    return result;
  }

  nextRunInMs(): number {
    return this.tickMs;
  }
}
