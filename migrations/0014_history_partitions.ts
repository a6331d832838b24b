import { type Kysely, sql } from 'kysely';

/**
 * Finished jobs partitioned by the day they finished, so retention removes whole partitions
 * (docs/adr/0001-history-partitions.md; src/maintenance/history-partitions.ts keeps them).
 *
 *   baton.job_history                    LIST (state)
 *     baton.job_history_done             ('completed', 'cancelled')  RANGE (finished_at)
 *       baton.job_history_done_YYYYMMDD  one UTC day: [day, day + 1)
 *       baton.job_history_done_default   anything no day partition takes (kept empty: see below)
 *     baton.job_history_dead             ('dead')                    RANGE (finished_at)
 *       baton.job_history_dead_YYYYMMDD, baton.job_history_dead_default
 *
 * The first level splits the two retentions (completed and cancelled jobs share one, dead jobs have
 * their own, 1 day and 14 days by default), so a day of completed jobs is not held for the dead jobs
 * of the same day. The default partitions mean an insert never fails for want of a partition; the
 * leader creates each day's partitions days ahead and moves into a new day partition whatever the
 * default holds of that day.
 *
 * A partitioned table's primary key must contain its partition keys: (id, state, finished_at). Ids
 * are still unique (drawn from baton.jobs_id_seq; a job is in history at most once), and the key's
 * leading id serves every lookup by id, one probe per partition.
 *
 * Existing rows are copied into the new table in this transaction (a table of millions of rows takes
 * a while; inserts into history wait for it).
 */

const DAYS_AHEAD = 2;
const RELOPTIONS = sql`autovacuum_vacuum_scale_factor = 0.05, autovacuum_vacuum_insert_scale_factor = 0.05`;
const CLASSES = [
  { name: 'done', states: sql`'completed', 'cancelled'`, match: sql`state IN ('completed', 'cancelled')` },
  { name: 'dead', states: sql`'dead'`, match: sql`state = 'dead'` },
] as const;

const COLUMNS = sql`id, queue, group_key, state, priority, run_at, attempts, max_attempts, worker_id,
  idempotency_key, dead_reason, created_at, claimed_at, finished_at, last_error, errors, result, payload,
  ack_token, meta, timeout_ms, expires_at, unique_key`;

async function createIndexes(db: Kysely<any>): Promise<void> {
  await sql`ALTER TABLE baton.job_history ADD CONSTRAINT job_history_pkey PRIMARY KEY (id, state, finished_at)`.execute(
    db,
  );
  await sql`CREATE INDEX job_history_queue_state_finished_idx ON baton.job_history (queue, state, finished_at, id)`.execute(
    db,
  );
  await sql`CREATE INDEX job_history_group_idx ON baton.job_history (queue, group_key, state, finished_at, id)
            WHERE group_key <> ''`.execute(db);
}

export async function up(db: Kysely<any>): Promise<void> {
  await sql`LOCK TABLE baton.job_history IN EXCLUSIVE MODE`.execute(db);
  await sql`
    CREATE TABLE baton.job_history_parted (LIKE baton.job_history INCLUDING DEFAULTS INCLUDING CONSTRAINTS)
    PARTITION BY LIST (state)`.execute(db);
  for (const c of CLASSES) {
    const parent = sql.table(`baton.job_history_${c.name}`);
    await sql`
      CREATE TABLE ${parent} PARTITION OF baton.job_history_parted FOR VALUES IN (${c.states})
      PARTITION BY RANGE (finished_at)`.execute(db);
    await sql`
      CREATE TABLE ${sql.table(`baton.job_history_${c.name}_default`)} PARTITION OF ${parent} DEFAULT
      WITH (${RELOPTIONS})`.execute(db);
    // A partition for every UTC day the existing rows finished on, and for today and the days ahead.
    const { rows } = await sql<{ day: string }>`
      SELECT to_char(d, 'YYYYMMDD') AS day FROM (
        SELECT DISTINCT date_trunc('day', finished_at, 'UTC') AS d FROM baton.job_history WHERE ${c.match}
        UNION
        SELECT date_trunc('day', now(), 'UTC') + n * interval '1 day' FROM generate_series(0, ${DAYS_AHEAD}) n
      ) days ORDER BY 1`.execute(db);
    for (const { day } of rows) {
      const from = new Date(`${day.slice(0, 4)}-${day.slice(4, 6)}-${day.slice(6, 8)}T00:00:00Z`);
      const to = new Date(from.getTime() + 86_400_000);
      await sql`
        CREATE TABLE ${sql.table(`baton.job_history_${c.name}_${day}`)} PARTITION OF ${parent}
        FOR VALUES FROM (${sql.lit(from.toISOString())}) TO (${sql.lit(to.toISOString())})
        WITH (${RELOPTIONS})`.execute(db);
    }
  }
  await sql`
    INSERT INTO baton.job_history_parted (${COLUMNS}) SELECT ${COLUMNS} FROM baton.job_history`.execute(db);
  await sql`DROP TABLE baton.job_history`.execute(db);
  await sql`ALTER TABLE baton.job_history_parted RENAME TO job_history`.execute(db);
  await createIndexes(db);
  await sql`ANALYZE baton.job_history`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`LOCK TABLE baton.job_history IN EXCLUSIVE MODE`.execute(db);
  await sql`
    CREATE TABLE baton.job_history_plain (LIKE baton.job_history INCLUDING DEFAULTS INCLUDING CONSTRAINTS)
    WITH (${RELOPTIONS})`.execute(db);
  await sql`
    INSERT INTO baton.job_history_plain (${COLUMNS}) SELECT ${COLUMNS} FROM baton.job_history`.execute(db);
  await sql`DROP TABLE baton.job_history`.execute(db);
  await sql`ALTER TABLE baton.job_history_plain RENAME TO job_history`.execute(db);
  await sql`ALTER TABLE baton.job_history ADD CONSTRAINT job_history_pkey PRIMARY KEY (id)`.execute(db);
  await sql`CREATE INDEX job_history_queue_state_finished_idx ON baton.job_history (queue, state, finished_at, id)`.execute(
    db,
  );
  await sql`CREATE INDEX job_history_group_idx ON baton.job_history (queue, group_key, state, finished_at, id)
            WHERE group_key <> ''`.execute(db);
}
