import { type Kysely, sql } from 'kysely';

/**
 * Deadlines, expiry and unique jobs (docs/architecture.md, "Deadlines, expiry and unique jobs").
 *
 * - `timeout_ms`: a job's own budget for one attempt, from claim (NULL: the queue's, on
 *   baton.queues.timeout_ms; NULL there too: none). A claim stores the attempt's `deadline_at`
 *   (claimed_at + timeout) on the ring row and caps the lease at it; renewals never pass it, so the
 *   re-arm fires at the deadline.
 * - `expires_at`: no attempt starts after it. Claims skip such rows (a filter beside the ready
 *   index's order, not in it); the leader's expiry sweep moves them to history as dead. Waiting jobs
 *   that expire are found through a partial index on scheduled_jobs; the ring is small by design and
 *   is read whole, like the re-arm reads it.
 * - `unique_key`: at most one waiting job per queue and key. The key's owner is kept in
 *   baton.unique_keys (a plain table: a unique index on the partitioned ring would have to include
 *   the slot); a row whose job no longer waits is stale and is taken over by the next enqueue of the
 *   key (src/jobs/unique.ts).
 *
 * All columns are nullable without defaults: adding them rewrites nothing, and jobs that use none of
 * this carry NULLs that cost nothing.
 */
export async function up(db: Kysely<any>): Promise<void> {
  for (const table of ['jobs', 'scheduled_jobs', 'job_history']) {
    await sql`
      ALTER TABLE ${sql.table(`baton.${table}`)}
        ADD COLUMN timeout_ms integer,
        ADD COLUMN expires_at timestamptz,
        ADD COLUMN unique_key text`.execute(db);
  }
  await sql`ALTER TABLE baton.jobs ADD COLUMN deadline_at timestamptz`.execute(db);
  await sql`
    ALTER TABLE baton.queues
      ADD COLUMN timeout_ms integer,
      ADD CONSTRAINT queues_timeout_ms CHECK (timeout_ms BETWEEN 1000 AND 604800000)`.execute(db);
  await sql`
    CREATE INDEX scheduled_jobs_expires_idx ON baton.scheduled_jobs (expires_at)
    WHERE expires_at IS NOT NULL`.execute(db);
  await sql`
    CREATE TABLE baton.unique_keys (
      queue  text NOT NULL,
      key    text NOT NULL,
      job_id bigint NOT NULL,
      PRIMARY KEY (queue, key)
    )`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`DROP TABLE IF EXISTS baton.unique_keys`.execute(db);
  await sql`DROP INDEX IF EXISTS baton.scheduled_jobs_expires_idx`.execute(db);
  await sql`ALTER TABLE baton.queues DROP CONSTRAINT IF EXISTS queues_timeout_ms, DROP COLUMN IF EXISTS timeout_ms`.execute(
    db,
  );
  await sql`ALTER TABLE baton.jobs DROP COLUMN IF EXISTS deadline_at`.execute(db);
  for (const table of ['job_history', 'scheduled_jobs', 'jobs']) {
    await sql`
      ALTER TABLE ${sql.table(`baton.${table}`)}
        DROP COLUMN IF EXISTS unique_key, DROP COLUMN IF EXISTS expires_at, DROP COLUMN IF EXISTS timeout_ms`.execute(
      db,
    );
  }
}
