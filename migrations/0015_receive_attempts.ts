import { type Kysely, sql } from 'kysely';

/**
 * What an SQS FIFO receive with a ReceiveRequestAttemptId handed out, so that the same receive sent
 * again within five minutes (its answer lost on the way) answers the same messages with the same
 * receipt handles, on whichever replica it lands (src/jobs/receive-attempts.ts). One row per queue,
 * caller (the API key: a tenant boundary) and attempt id: the jobs, the lease token each was claimed
 * under and the lease's end as handed out, by position. Receives without an attempt id never touch
 * it; the leader deletes rows past the window (maintenance/receive-attempts.ts, by created_at).
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    CREATE TABLE baton.receive_attempts (
      queue text NOT NULL,
      caller text NOT NULL,
      attempt_id text NOT NULL,
      job_ids bigint[] NOT NULL,
      lease_tokens uuid[] NOT NULL,
      leases_until timestamptz[] NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (queue, caller, attempt_id),
      CHECK (cardinality(job_ids) = cardinality(lease_tokens) AND cardinality(job_ids) = cardinality(leases_until))
    )`.execute(db);
  await sql`CREATE INDEX receive_attempts_created_idx ON baton.receive_attempts (created_at)`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`DROP TABLE IF EXISTS baton.receive_attempts`.execute(db);
}
