import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { sql } from 'kysely';
import { Migrator } from 'kysely/migration';
import pg from 'pg';
import { migrations } from '../migrations/index.js';
import { createDatabase } from '../src/db/database.js';
import { getJobs } from '../src/jobs/read.js';
import { noLog } from '../src/logger.js';
import {
  createHistoryPartitions,
  dropExpiredHistoryPartitions,
  listHistoryPartitions,
} from '../src/maintenance/history-partitions.js';
import { pruneFinishedJobs } from '../src/maintenance/prune.js';
import { databaseUrl } from './databases.js';
import { PostgresCpu } from './postgres-cpu.js';
import { fmt, median } from './stats.js';

/**
 * What retiring finished jobs costs, on the history layout before day partitions (a checkout of the
 * commit before, `--before`: its migrations and its prune) and after (this tree), in the same run:
 *
 *   git worktree add .scratch/before-hist <commit before> && ln -s ../../node_modules .scratch/before-hist/
 *   npx tsx bench/history-prune.ts --before .scratch/before-hist [--rows 100000] [--rounds 3]
 *
 * Each round puts `rows` completed jobs finished two days ago (retention: one day) into history and
 * measures until they are gone: before, the row prune in batches until it reports noop, then the
 * VACUUM its deletes need; after, the history-partitions duty (its day is past every retention:
 * TRUNCATE, DROP) and the row prune (which finds nothing). And the case the partitions do not cover:
 * the same day shared with a queue that keeps its jobs 10 days, so the day stays and the other
 * queue's rows (90%) go row by row. For each: wall time, WAL (pg_current_wal_insert_lsn advance,
 * after a CHECKPOINT, so full-page images are counted the same way each time) and PostgreSQL's CPU
 * (bench/postgres-cpu.ts: the whole server, so other sessions on a shared machine count too; the
 * minimum over rounds is the best estimate). Last, reads by id of a finished job (the GET's
 * statement, jobs/read.ts) on each layout, the after layout holding the partitions a default
 * configuration keeps (16 days of dead jobs, 3 of completed, 2 ahead).
 */

const { values } = parseArgs({
  options: {
    before: { type: 'string', default: '.scratch/before-hist' },
    rows: { type: 'string', default: '100000' },
    rounds: { type: 'string', default: '3' },
    lookups: { type: 'string', default: '3000' },
  },
});
const ROWS = Number(values.rows);
const ROUNDS = Number(values.rounds);
const LOOKUPS = Number(values.lookups);
const DAY = 86_400_000;
const defaults = { completedRetentionMs: DAY, deadRetentionMs: 14 * DAY };
const prefix = process.env.BENCH_DB_PREFIX ?? 'baton_bench';
const NAMES = { before: `${prefix}_hist_before`, after: `${prefix}_hist_after` } as const;
const settings = { poolSize: 2, statementTimeoutMs: 600_000, connectTimeoutMs: 5_000 };

type Prune = typeof pruneFinishedJobs;
const beforeRoot = resolve(values.before!);
const beforePrune = (await import(`${beforeRoot}/src/maintenance/prune.ts`)).pruneFinishedJobs as Prune;
const beforeMigrations = (await import(`${beforeRoot}/migrations/index.ts`)).migrations as typeof migrations;

async function recreate(name: string) {
  const admin = new pg.Client({ connectionString: databaseUrl('postgres') });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
}

async function setUp(layout: 'before' | 'after') {
  await recreate(NAMES[layout]);
  const handle = createDatabase(databaseUrl(NAMES[layout]), settings, noLog, 'maintenance');
  const migrator = new Migrator({
    db: handle.db,
    provider: { getMigrations: async () => (layout === 'before' ? beforeMigrations : migrations) },
    migrationTableSchema: 'baton',
  });
  const { error } = await migrator.migrateToLatest();
  if (error) throw error;
  await sql`INSERT INTO baton.queues (name, auto_created, completed_retention_ms) VALUES ('old', false, NULL), ('keeper', false, ${10 * DAY})`.execute(
    handle.db,
  );
  return handle;
}

/** `rows` completed jobs finished two days ago; with `keeper`, every tenth of the queue that keeps 10 days. */
async function fill(handle: ReturnType<typeof createDatabase>, layout: 'before' | 'after', keeper: boolean) {
  await sql`TRUNCATE baton.job_history`.execute(handle.db);
  await sql`
    INSERT INTO baton.job_history (id, queue, state, priority, run_at, attempts, max_attempts, created_at,
                                   claimed_at, finished_at, payload)
    SELECT nextval('baton.jobs_id_seq'), CASE WHEN ${keeper} AND g % 10 = 0 THEN 'keeper' ELSE 'old' END,
           'completed', 0, now() - interval '3 days', 1, 5, now() - interval '3 days', now() - interval '3 days',
           now() - interval '2 days' + g * interval '1 ms', jsonb_build_object('i', g)
    FROM generate_series(1, ${ROWS}::integer) g`.execute(handle.db);
  // After: the rows are in the default partition (their day had none); the duty moves them into
  // their day, as it would have stood had they been acked then.
  if (layout === 'after') await createHistoryPartitions(handle.db, { lockTimeoutMs: 5000, defaults });
  await sql`VACUUM ANALYZE baton.job_history`.execute(handle.db);
  await sql`CHECKPOINT`.execute(handle.db);
}

interface Cost {
  ms: number;
  walMiB: number;
  cpuMs: number;
}

async function measure(
  handle: ReturnType<typeof createDatabase>,
  cpu: PostgresCpu,
  step: () => Promise<unknown>,
) {
  const lsn = (await sql<{ l: string }>`SELECT pg_current_wal_insert_lsn()::text AS l`.execute(handle.db))
    .rows[0]!.l;
  cpu.start();
  const t0 = performance.now();
  await step();
  const ms = performance.now() - t0;
  const cpuMs = cpu.read();
  const wal = await sql<{
    b: string;
  }>`SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), ${lsn}::pg_lsn)::text AS b`.execute(handle.db);
  return { ms, walMiB: Number(wal.rows[0]!.b) / 2 ** 20, cpuMs };
}

async function pruneUntilNoop(prune: Prune, handle: ReturnType<typeof createDatabase>) {
  for (;;) {
    const r = await prune(handle.db, { batchSize: 1000, lockTimeoutMs: 50, defaults });
    if (r.outcome === 'blocked') throw new Error('prune blocked on an idle table');
    if (r.outcome === 'noop') return;
  }
}

async function left(handle: ReturnType<typeof createDatabase>, queue: string) {
  const { rows } = await sql<{
    n: number;
  }>`SELECT count(*)::int AS n FROM baton.job_history WHERE queue = ${queue}`.execute(handle.db);
  return rows[0]!.n;
}

const before = await setUp('before');
const after = await setUp('after');
const cpu = await PostgresCpu.of(before.pool);
const results: Record<string, Cost[]> = {
  'before: row prune': [],
  'before: VACUUM after it': [],
  'after: partition duty + row prune': [],
  'after, a 10-day queue shares the day: row prune (90% of rows)': [],
  'after, the same: partition duty': [],
};
try {
  for (let round = 0; round < ROUNDS; round++) {
    await fill(before, 'before', false);
    results['before: row prune']!.push(await measure(before, cpu, () => pruneUntilNoop(beforePrune, before)));
    if ((await left(before, 'old')) !== 0) throw new Error('before: rows left');
    results['before: VACUUM after it']!.push(
      await measure(before, cpu, () => sql`VACUUM baton.job_history`.execute(before.db)),
    );

    await fill(after, 'after', false);
    const opts = { lockTimeoutMs: 5000, defaults };
    results['after: partition duty + row prune']!.push(
      await measure(after, cpu, async () => {
        const r = await dropExpiredHistoryPartitions(after.db, opts);
        if (r.dropped.length === 0) throw new Error(`after: dropped ${JSON.stringify(r)}`);
        await pruneUntilNoop(pruneFinishedJobs, after);
      }),
    );
    if ((await left(after, 'old')) !== 0) throw new Error('after: rows left');

    await fill(after, 'after', true);
    results['after, a 10-day queue shares the day: row prune (90% of rows)']!.push(
      await measure(after, cpu, () => pruneUntilNoop(pruneFinishedJobs, after)),
    );
    results['after, the same: partition duty']!.push(
      await measure(after, cpu, () => dropExpiredHistoryPartitions(after.db, opts)),
    );
    if ((await left(after, 'old')) !== 0 || (await left(after, 'keeper')) !== ROWS / 10)
      throw new Error('after (shared day): wrong rows left');
    console.log(`round ${round + 1} of ${ROUNDS} done`);
  }

  // Reads by id: a default configuration's partitions on the after layout.
  await sql`TRUNCATE baton.job_history`.execute(after.db);
  await sql`
    INSERT INTO baton.job_history (id, queue, state, priority, run_at, attempts, max_attempts, created_at, finished_at,
                                   dead_reason, payload)
    SELECT nextval('baton.jobs_id_seq'), 'old', s, 0, now(), 1, 1, now(), now() - d * interval '1 day',
           CASE WHEN s = 'dead' THEN 'nacked_dead' END, '{}'
    FROM generate_series(0, 15) d, (VALUES ('completed'), ('dead')) AS st(s), generate_series(1, 200) g
    WHERE s = 'dead' OR d <= 2`.execute(after.db);
  while ((await createHistoryPartitions(after.db, { lockTimeoutMs: 5000, defaults })).created.length > 0) {}
  await sql`ANALYZE baton.job_history`.execute(after.db);
  const leaves = (await listHistoryPartitions(after.db)).length + 2;
  const lookups: Record<string, number> = {};
  for (const [layout, handle] of [
    ['before', before],
    ['after', after],
  ] as const) {
    await sql`TRUNCATE baton.job_history`.execute(before.db);
    if (layout === 'before')
      await sql`
        INSERT INTO baton.job_history (id, queue, state, priority, run_at, attempts, max_attempts, created_at,
                                       finished_at, payload)
        SELECT nextval('baton.jobs_id_seq'), 'old', 'completed', 0, now(), 1, 1, now(), now(), '{}'
        FROM generate_series(1, 4000)`.execute(before.db);
    const ids = (
      await sql<{
        id: string;
      }>`SELECT id::text FROM baton.job_history ORDER BY random() LIMIT ${LOOKUPS}`.execute(handle.db)
    ).rows.map((r) => r.id);
    const requests = createDatabase(
      databaseUrl(NAMES[layout]),
      { ...settings, poolSize: 1 },
      noLog,
      'requests',
    );
    try {
      for (const id of ids.slice(0, 200)) await getJobs(requests.db, [id]);
      const t0 = performance.now();
      for (const id of ids)
        if ((await getJobs(requests.db, [id])).size !== 1) throw new Error('lookup missed');
      lookups[layout] = ((performance.now() - t0) / ids.length) * 1000;
    } finally {
      await requests.close();
    }
  }

  const min = (xs: Cost[], k: keyof Cost) => Math.min(...xs.map((x) => x[k]));
  console.log(
    `\n${ROWS.toLocaleString('en-US')} completed jobs past retention, ${ROUNDS} rounds (median / minimum)`,
  );
  console.log('| step | time, ms | WAL, MiB | PostgreSQL CPU, ms |');
  console.log('| --- | ---: | ---: | ---: |');
  for (const [name, xs] of Object.entries(results)) {
    const cell = (k: keyof Cost) => `${fmt(median(xs.map((x) => x[k])))} / ${fmt(min(xs, k))}`;
    console.log(`| ${name} | ${cell('ms')} | ${cell('walMiB')} | ${cell('cpuMs')} |`);
  }
  console.log(
    `\nRead of a finished job by id (jobs/read.ts getJobs, one id, request pool): before ${fmt(lookups.before!)} µs, after ${fmt(lookups.after!)} µs with ${leaves} history partitions`,
  );
} finally {
  await before.close();
  await after.close();
  for (const name of Object.values(NAMES)) {
    const admin = new pg.Client({ connectionString: databaseUrl('postgres') });
    await admin.connect();
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await admin.end();
  }
}
