import { type Kysely, sql } from 'kysely';

/**
 * Flow control (docs/architecture.md, "Flow control"): job groups, concurrency and rate limits per
 * queue and per group, and groups served in turn.
 *
 * - Every job has a group key; '' is "no group". Group keys compare byte by byte (COLLATE "C"): the
 *   order groups are served in is the same on every PostgreSQL, whatever its locale. It is part of the claim's second index, which lists
 *   ready jobs group by group, so a claim can visit groups in turn without reading any group twice.
 * - Claimed jobs are counted per queue and group on a partial index, for the concurrency limits.
 * - A queue's limits live on its row; a group's overrides (limits, weight, paused) in
 *   baton.queue_groups, written only by operators.
 * - What a claim of a limited or grouped queue must remember between claims (the group it served
 *   last, the claims of the last rate period) lives in baton.flow_state, one row per queue and one
 *   per rate-limited group, written only by claims, which take these rows in turn.
 * - `grouped` on the queue row is set once, by the first enqueue of a job with a group, so claims of
 *   queues that never had groups keep their one-statement fast path.
 */
export async function up(db: Kysely<any>): Promise<void> {
  for (const table of ['jobs', 'scheduled_jobs', 'job_history']) {
    await sql`ALTER TABLE ${sql.table(`baton.${table}`)} ADD COLUMN group_key text COLLATE "C" NOT NULL DEFAULT ''`.execute(
      db,
    );
  }
  await sql`
    CREATE INDEX jobs_group_ready_idx ON baton.jobs (queue, group_key, priority DESC, run_at, id)
    WHERE state = 'ready'`.execute(db);
  await sql`CREATE INDEX jobs_claimed_idx ON baton.jobs (queue, group_key) WHERE state = 'claimed'`.execute(
    db,
  );
  await sql`CREATE INDEX job_history_group_idx ON baton.job_history (queue, group_key, state, finished_at, id)
            WHERE group_key <> ''`.execute(db);

  await sql`
    ALTER TABLE baton.queues
      ADD COLUMN grouped boolean NOT NULL DEFAULT false,
      ADD COLUMN concurrency_limit integer,
      ADD COLUMN rate_limit integer,
      ADD COLUMN rate_period_ms integer,
      ADD COLUMN group_concurrency_limit integer,
      ADD COLUMN group_rate_limit integer,
      ADD COLUMN group_rate_period_ms integer,
      ADD CONSTRAINT queues_limits CHECK (
        concurrency_limit > 0 AND group_concurrency_limit > 0
        AND (rate_limit IS NULL) = (rate_period_ms IS NULL) AND rate_limit > 0 AND rate_period_ms > 0
        AND (group_rate_limit IS NULL) = (group_rate_period_ms IS NULL)
        AND group_rate_limit > 0 AND group_rate_period_ms > 0)`.execute(db);

  await sql`
    CREATE TABLE baton.queue_groups (
      queue             text NOT NULL REFERENCES baton.queues (name) ON DELETE CASCADE,
      group_key         text COLLATE "C" NOT NULL,
      concurrency_limit integer,
      rate_limit        integer,
      rate_period_ms    integer,
      weight            integer,
      paused            boolean NOT NULL DEFAULT false,
      updated_at        timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (queue, group_key),
      CONSTRAINT queue_groups_limits CHECK (
        concurrency_limit > 0 AND weight > 0
        AND (rate_limit IS NULL) = (rate_period_ms IS NULL) AND rate_limit > 0 AND rate_period_ms > 0)
    )`.execute(db);

  // `is_queue` marks the queue's own row; the others are groups'. Rate windows are kept as parallel arrays of claim times
  // and how many jobs each claim took, trimmed to the period by the claim that appends.
  await sql`
    CREATE TABLE baton.flow_state (
      queue        text NOT NULL REFERENCES baton.queues (name) ON DELETE CASCADE,
      group_key    text COLLATE "C" NOT NULL DEFAULT '',
      is_queue     boolean NOT NULL,
      last_group   text COLLATE "C",
      claim_times  timestamptz[] NOT NULL DEFAULT '{}',
      claim_counts integer[] NOT NULL DEFAULT '{}',
      PRIMARY KEY (queue, is_queue, group_key)
    )`.execute(db);

  // Per-group counts, kept by the leader for the groups API (busiest first) and the dashboard. A row
  // is rewritten only when its counts change (so ten thousand idle groups cost no writes); when the
  // leader last counted a queue's groups is queue_stats.groups_refreshed_at. Groups with overrides
  // have a row even without jobs, so the list shows them.
  await sql`
    CREATE TABLE baton.group_stats (
      queue        text NOT NULL REFERENCES baton.queues (name) ON DELETE CASCADE,
      group_key    text COLLATE "C" NOT NULL,
      ready        bigint NOT NULL DEFAULT 0,
      claimed      bigint NOT NULL DEFAULT 0,
      scheduled    bigint NOT NULL DEFAULT 0,
      PRIMARY KEY (queue, group_key)
    )`.execute(db);
  await sql`CREATE INDEX group_stats_busiest_idx ON baton.group_stats (queue, (ready + claimed) DESC, group_key)`.execute(
    db,
  );
  await sql`ALTER TABLE baton.queue_stats ADD COLUMN groups_refreshed_at timestamptz`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`ALTER TABLE baton.queue_stats DROP COLUMN IF EXISTS groups_refreshed_at`.execute(db);
  await sql`DROP TABLE IF EXISTS baton.group_stats, baton.flow_state, baton.queue_groups`.execute(db);
  await sql`
    ALTER TABLE baton.queues DROP CONSTRAINT IF EXISTS queues_limits,
      DROP COLUMN IF EXISTS grouped, DROP COLUMN IF EXISTS concurrency_limit, DROP COLUMN IF EXISTS rate_limit,
      DROP COLUMN IF EXISTS rate_period_ms, DROP COLUMN IF EXISTS group_concurrency_limit,
      DROP COLUMN IF EXISTS group_rate_limit, DROP COLUMN IF EXISTS group_rate_period_ms`.execute(db);
  await sql`DROP INDEX IF EXISTS baton.job_history_group_idx, baton.jobs_claimed_idx, baton.jobs_group_ready_idx`.execute(
    db,
  );
  for (const table of ['jobs', 'scheduled_jobs', 'job_history']) {
    await sql`ALTER TABLE ${sql.table(`baton.${table}`)} DROP COLUMN IF EXISTS group_key`.execute(db);
  }
}
