import { type Kysely, sql } from 'kysely';

/**
 * Per-queue statistics maintained by the leader (src/maintenance/queue-stats.ts), so that stats
 * reads and metric scrapes never count rows: live counts are refreshed every tick, finished counts
 * (within retention) and the last minute's throughput less often. One row per queue.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    CREATE TABLE baton.queue_stats (
      queue                 text PRIMARY KEY,
      scheduled             bigint NOT NULL DEFAULT 0,
      ready                 bigint NOT NULL DEFAULT 0,
      claimed               bigint NOT NULL DEFAULT 0,
      oldest_ready_at       timestamptz,
      live_refreshed_at     timestamptz,
      completed             bigint NOT NULL DEFAULT 0,
      dead                  bigint NOT NULL DEFAULT 0,
      cancelled             bigint NOT NULL DEFAULT 0,
      completed_last_minute bigint NOT NULL DEFAULT 0,
      finished_refreshed_at timestamptz
    )`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`DROP TABLE IF EXISTS baton.queue_stats`.execute(db);
}
