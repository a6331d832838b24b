import { type Kysely, sql } from 'kysely';

/**
 * Push queues (docs/push.md): a queue with a row here has its jobs delivered by Baton to `url`
 * (push/dispatcher.ts) instead of waiting for workers to claim them. The signing secret is kept to
 * sign each delivery and never read back by the API after it is made; during a rotation the
 * previous secret signs too, until `previous_until`. The row goes with its queue.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    CREATE TABLE baton.push_endpoints (
      queue text PRIMARY KEY REFERENCES baton.queues (name) ON DELETE CASCADE,
      url text NOT NULL,
      timeout_ms integer NOT NULL,
      concurrency integer NOT NULL,
      secret text NOT NULL,
      previous_secret text,
      previous_until timestamptz,
      secret_created_at timestamptz NOT NULL DEFAULT now(),
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      CONSTRAINT push_endpoints_timeout CHECK (timeout_ms BETWEEN 100 AND 900000),
      CONSTRAINT push_endpoints_concurrency CHECK (concurrency BETWEEN 1 AND 1000)
    )`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`DROP TABLE IF EXISTS baton.push_endpoints`.execute(db);
}
