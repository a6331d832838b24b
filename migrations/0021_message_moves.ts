import { type Kysely, sql } from 'kysely';

/**
 * Message moves (jobs/message-moves.ts): the ready jobs of a dead-letter queue sent back to the
 * queues they died in, or to a named queue, at an optional rate; what SQS calls a message move task
 * (StartMessageMoveTask). One row per move, driven by the leader (maintenance/message-moves.ts) in
 * batches, so a move survives the replica that started it. `patterns` are the starting key's queue
 * patterns (NULL: any queue): the leader moves a job only into a queue that key may use. At most one
 * move of a queue runs at a time (the partial unique index), as SQS allows one active task per
 * source queue. Finished moves are kept 14 days, as SQS lists them.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    CREATE TABLE baton.message_moves (
      id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
      source_queue text NOT NULL,
      destination_queue text,
      max_per_second integer CHECK (max_per_second BETWEEN 1 AND 500),
      patterns text[],
      status text NOT NULL DEFAULT 'running'
        CHECK (status IN ('running', 'completed', 'cancelled', 'failed')),
      moved bigint NOT NULL DEFAULT 0,
      to_move bigint NOT NULL,
      failure_reason text,
      started_at timestamptz NOT NULL DEFAULT now(),
      progressed_at timestamptz NOT NULL DEFAULT now(),
      finished_at timestamptz
    )`.execute(db);
  await sql`
    CREATE UNIQUE INDEX message_moves_running_idx ON baton.message_moves (source_queue)
    WHERE status = 'running'`.execute(db);
  await sql`CREATE INDEX message_moves_source_idx ON baton.message_moves (source_queue, started_at DESC)`.execute(
    db,
  );
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`DROP TABLE IF EXISTS baton.message_moves`.execute(db);
}
