import { type Kysely, sql } from 'kysely';

/**
 * Workers that announce themselves (PUT /v1/workers/{id}, jobs/workers.ts): what a worker says of
 * itself (host, pid, concurrency, version, the queues it works) and when it was last seen (its
 * announcement, repeated as a heartbeat, or a claim naming it on one of those queues). One row per
 * announcing API key (`owner`, '' without keys) and worker id, so one tenant cannot overwrite
 * another's worker of the same name. A worker silent past BATON_WORKER_SILENCE_MS is not listed;
 * the leader forgets it a day later.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    CREATE TABLE baton.workers (
      owner text NOT NULL,
      id text NOT NULL,
      host text,
      pid integer,
      concurrency integer,
      version text,
      queues text[] NOT NULL,
      started_at timestamptz NOT NULL DEFAULT now(),
      last_seen_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (owner, id)
    )`.execute(db);
  await sql`CREATE INDEX workers_seen_idx ON baton.workers (last_seen_at)`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`DROP TABLE IF EXISTS baton.workers`.execute(db);
}
