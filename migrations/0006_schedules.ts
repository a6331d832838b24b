import { type Kysely, sql } from 'kysely';

/**
 * Cron schedules (issue 18): each row enqueues a job into `queue` at every occurrence of `cron` in
 * `timezone`. The leader's schedules duty (src/maintenance/schedules.ts) takes due rows FOR UPDATE
 * SKIP LOCKED and, in the same transaction as each occurrence's enqueue, moves `next_run_at` on, so
 * an occurrence is enqueued exactly once however many leaders try.
 *
 * Like every migration it describes the database as it was when written and never imports src/.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    CREATE TABLE baton.schedules (
      name         text PRIMARY KEY,
      queue        text NOT NULL,
      cron         text NOT NULL,
      timezone     text NOT NULL DEFAULT 'UTC',
      payload      jsonb NOT NULL DEFAULT 'null',
      priority     integer NOT NULL DEFAULT 0,
      max_attempts integer,
      overlap      text NOT NULL DEFAULT 'allow',
      catch_up     text NOT NULL DEFAULT 'latest',
      paused       boolean NOT NULL DEFAULT false,
      -- The next occurrence not yet handled (database clock); NULL when the cron never fires again.
      next_run_at  timestamptz,
      last_run_at  timestamptz,
      last_job_id  bigint,
      last_error   jsonb,
      -- The definition BATON_SCHEDULES_FILE last applied (NULL: made through the API). A row whose
      -- definition no longer equals it was changed through the API: drifted, and the file leaves it.
      file_spec    jsonb,
      created_at   timestamptz NOT NULL DEFAULT now(),
      updated_at   timestamptz NOT NULL DEFAULT now(),
      CONSTRAINT schedules_name_format CHECK (name ~ '^[A-Za-z0-9._-]{1,128}$'),
      CONSTRAINT schedules_queue_format CHECK (queue ~ '^[A-Za-z0-9._-]{1,128}$'),
      CONSTRAINT schedules_overlap CHECK (overlap IN ('allow', 'skip')),
      CONSTRAINT schedules_catch_up CHECK (catch_up IN ('none', 'latest', 'all')),
      CONSTRAINT schedules_max_attempts CHECK (max_attempts BETWEEN 1 AND 1000)
    ) WITH (
      -- Every occurrence rewrites the row (next_run_at is indexed, so never a HOT update): with many
      -- schedules firing every minute, vacuum should not wait for 20% of the table to be dead.
      autovacuum_vacuum_scale_factor = 0.05,
      autovacuum_analyze_scale_factor = 0.05
    )`.execute(db);

  // What the duty reads every run: only unpaused rows, in due order, so it never scans the rest.
  // Then by queue: when thousands come due at the same second, each batch of them then spans few
  // queues, and the duty's inserts are one statement per queue.
  await sql`
    CREATE INDEX schedules_due_idx ON baton.schedules (next_run_at, queue)
    WHERE NOT paused AND next_run_at IS NOT NULL`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`DROP TABLE IF EXISTS baton.schedules`.execute(db);
}
