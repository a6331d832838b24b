import type pg from 'pg';
import { createDatabase } from '../../src/db/database.js';
import { noLog } from '../../src/logger.js';
import { MAINTENANCE_BATCH } from '../../src/maintenance/duty.js';
import {
  createHistoryPartitions,
  dropExpiredHistoryPartitions,
} from '../../src/maintenance/history-partitions.js';
import { pruneFinishedJobs } from '../../src/maintenance/prune.js';
import type { BenchContext } from '../context.js';
import { DATABASES, databaseUrl } from '../databases.js';
import type { Metric, ScenarioResult } from '../report.js';
import { fmt, median } from '../stats.js';

/**
 * The cost of the leader's retirement of finished jobs: the history-partitions duty
 * (src/maintenance/history-partitions.ts), which empties a day partition whose rows are all past
 * retention, then the row prune (src/maintenance/prune.ts, pruneFinishedJobs) in batches of
 * MAINTENANCE_BATCH until it reports noop, as the leader runs them. History rows past retention are
 * written straight into baton.job_history (the default partition, their day having none) and moved
 * into their day partition before the clock starts; the VACUUM after it is measured too. The
 * contrast is a plain table shaped and indexed like job_history holding the same rows, dropped. Row
 * deletes on the layout before day partitions: bench/history-prune.ts.
 *
 * WAL is the advance of pg_current_wal_insert_lsn() over each step. It is cluster-wide, so on this
 * shared server it includes whatever else was written at the time (the minimum over rounds is the
 * best estimate), and the first change to each page after a checkpoint logs a full page image, so it
 * also depends on where the step falls relative to checkpoints.
 */

const DAY = 86_400_000;
const QUEUE = 'prune-bench';

async function walLsn(admin: pg.Pool): Promise<string> {
  return (await admin.query<{ lsn: string }>('SELECT pg_current_wal_insert_lsn() AS lsn')).rows[0]!.lsn;
}

async function walSince(admin: pg.Pool, from: string): Promise<number> {
  const { rows } = await admin.query<{ bytes: string }>(
    'SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), $1) AS bytes',
    [from],
  );
  return Number(rows[0]!.bytes);
}

async function measure(
  admin: pg.Pool,
  step: () => Promise<unknown>,
): Promise<{ ms: number; walBytes: number }> {
  const lsn = await walLsn(admin);
  const t0 = performance.now();
  await step();
  const ms = performance.now() - t0;
  return { ms, walBytes: await walSince(admin, lsn) };
}

const insertHistory = (table: string, n: number) => `
  INSERT INTO ${table} (id, queue, state, priority, run_at, attempts, max_attempts, created_at,
                        claimed_at, finished_at, payload)
  SELECT nextval('baton.jobs_id_seq'), '${QUEUE}', 'completed', 0, now() - interval '3 days', 1, 5,
         now() - interval '3 days', now() - interval '3 days', now() - interval '2 days', jsonb_build_object('i', g)
  FROM generate_series(1, ${n}) g`;

export async function pruneCost(ctx: BenchContext): Promise<ScenarioResult> {
  const { admin } = await ctx.baton();
  const rows = ctx.sizes.pruneRows;
  const rounds = ctx.sizes.claimRounds;
  const handle = createDatabase(
    databaseUrl(DATABASES.baton),
    { poolSize: 2, statementTimeoutMs: 600_000, connectTimeoutMs: 5_000 },
    noLog,
  );
  const per100k = (x: number) => (x / rows) * 100_000;
  const out = {
    pruneMs: [] as number[],
    pruneWal: [] as number[],
    vacuumMs: [] as number[],
    vacuumWal: [] as number[],
    dropMs: [] as number[],
    dropWal: [] as number[],
    batches: 0,
  };
  try {
    await admin.query(
      `INSERT INTO baton.queues (name, auto_created) VALUES ($1, false) ON CONFLICT (name) DO NOTHING`,
      [QUEUE],
    );
    for (let round = 0; round < rounds; round++) {
      await admin.query('TRUNCATE baton.jobs, baton.job_history');
      await admin.query(insertHistory('baton.job_history', rows));
      const partitionOpts = {
        lockTimeoutMs: 5000,
        defaults: { completedRetentionMs: DAY, deadRetentionMs: 14 * DAY },
      };
      await createHistoryPartitions(handle.db, partitionOpts);
      await admin.query('VACUUM ANALYZE baton.job_history');
      let batches = 0;
      const prune = await measure(admin, async () => {
        await dropExpiredHistoryPartitions(handle.db, partitionOpts);
        while (true) {
          const r = await pruneFinishedJobs(handle.db, {
            batchSize: MAINTENANCE_BATCH,
            lockTimeoutMs: 50,
            defaults: { completedRetentionMs: DAY, deadRetentionMs: 14 * DAY },
          });
          if (r.outcome === 'blocked') throw new Error('prune was blocked (lock timeout) on an idle table');
          if (r.outcome === 'noop') break;
          batches++;
        }
      });
      const left = await admin.query<{ n: string }>('SELECT count(*) AS n FROM baton.job_history');
      if (Number(left.rows[0]!.n) !== 0) throw new Error(`prune left ${left.rows[0]!.n} rows`);
      const vacuum = await measure(admin, () => admin.query('VACUUM baton.job_history'));

      await admin.query('DROP SCHEMA IF EXISTS bench_prune CASCADE');
      await admin.query('CREATE SCHEMA bench_prune');
      await admin.query(
        'CREATE TABLE bench_prune.history_part (LIKE baton.job_history_done_default INCLUDING ALL)',
      );
      await admin.query(insertHistory('bench_prune.history_part', rows));
      await admin.query('VACUUM ANALYZE bench_prune.history_part');
      const drop = await measure(admin, () => admin.query('DROP TABLE bench_prune.history_part'));
      await admin.query('DROP SCHEMA bench_prune CASCADE');

      out.pruneMs.push(per100k(prune.ms));
      out.pruneWal.push(per100k(prune.walBytes) / 2 ** 20);
      out.vacuumMs.push(per100k(vacuum.ms));
      out.vacuumWal.push(per100k(vacuum.walBytes) / 2 ** 20);
      out.dropMs.push(drop.ms);
      out.dropWal.push(drop.walBytes / 2 ** 20);
      out.batches = batches;
      ctx.log(
        `  prune round ${round + 1}: ${rows} rows in ${batches} batches, ${fmt(prune.ms)} ms, ${fmt(prune.walBytes / 2 ** 20)} MiB WAL; vacuum ${fmt(vacuum.ms)} ms; drop ${fmt(drop.ms)} ms, ${fmt(drop.walBytes / 1024)} KiB WAL`,
      );
    }
  } finally {
    await handle.close();
    await admin.query('TRUNCATE baton.jobs, baton.job_history');
  }
  const metric = (id: string, title: string, unit: string, series: Record<string, number[]>): Metric => ({
    id,
    title,
    unit,
    better: 'lower',
    ratios: false,
    series,
  });
  return {
    id: 'prune',
    title: 'Cost of the leader prune (a day partition emptied, then row batches) vs dropping a table',
    setup: [
      `${rows.toLocaleString('en-US')} completed jobs past retention per round, ${rounds} rounds, in one day partition; the history-partitions duty, then pruneFinishedJobs in batches of ${MAINTENANCE_BATCH} (${out.batches} batches) until it reports noop, then VACUUM baton.job_history.`,
      `Partition contrast: a table LIKE baton.job_history INCLUDING ALL (same indexes) holding the same ${rows.toLocaleString('en-US')} rows, dropped.`,
      'WAL: cluster-wide LSN advance during each step (includes other activity on this shared server; compare minimums).',
    ],
    metrics: [
      metric('prune.time', 'Time per 100,000 rows', 'ms', {
        'prune (partition duty, then row batches)': out.pruneMs,
        'VACUUM after the prune': out.vacuumMs,
        'DROP of a partition with the same rows (whole drop)': out.dropMs,
      }),
      metric('prune.wal', 'WAL per 100,000 rows', 'MiB', {
        'prune (partition duty, then row batches)': out.pruneWal,
        'VACUUM after the prune': out.vacuumWal,
        'DROP of a partition with the same rows (whole drop)': out.dropWal,
      }),
    ],
    checks: [],
    details: {
      minimumPruneWalMiBPer100k: Math.min(...out.pruneWal),
      medianPruneMsPer100k: median(out.pruneMs),
    },
  };
}
