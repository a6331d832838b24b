import { type Kysely, sql } from 'kysely';

/**
 * Per-minute history of each queue, written by the leader's queue-stats duty (see
 * src/maintenance/queue-history.ts) and read by GET /v1/queues/{queue}/history for the dashboard's
 * charts. One row per queue and minute in which something happened; pruned after a day.
 *
 * A row is a sample taken at `at`: the live counts then (levels), and the jobs that finished in
 * (since, at] plus those that arrived in that window (flows). `enqueued` is derived, not counted:
 * live now − live at `since` + finished in between (null when there is no earlier sample).
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    CREATE TABLE baton.queue_history (
      queue               text        NOT NULL,
      minute              timestamptz NOT NULL,
      at                  timestamptz NOT NULL,
      since               timestamptz NOT NULL,
      scheduled           bigint      NOT NULL,
      ready               bigint      NOT NULL,
      claimed             bigint      NOT NULL,
      oldest_ready_age_ms bigint,
      enqueued            bigint,
      completed           bigint      NOT NULL,
      dead                bigint      NOT NULL,
      cancelled           bigint      NOT NULL,
      PRIMARY KEY (queue, minute)
    )`.execute(db);
  // Serves the prune, which goes by age across all queues.
  await sql`CREATE INDEX queue_history_minute_idx ON baton.queue_history (minute)`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`DROP TABLE IF EXISTS baton.queue_history`.execute(db);
}
