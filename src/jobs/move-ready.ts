import { sql } from 'kysely';
import type { Db } from '../db/database.js';
import { queueVisible } from '../db/queue-patterns.js';
import { type ReturnedJob, settleReturnedKeys } from './unique-return.js';

/**
 * One batch of a message move (jobs/message-moves.ts): up to `limit` ready jobs of `source` that
 * were ready by `readyBy` go to `destination`, or, without one, each back to the queue it died in
 * (`meta.sqs.dead_letter_source`, jobs/redrive.ts) or else to `fallback` (the dead-letter queue's only
 * source). A job moves only into a queue that exists and that `patterns` allow (the key that started
 * the move: a tenant cannot push jobs into another's queue); the rest stay where they are.
 *
 * `readyBy` is the move's start: a job reaches a dead-letter queue ready at the time it arrives, so
 * a job that dies again after being moved, and arrives again, is not moved a second time by the same
 * move (which would otherwise never end while its destination keeps failing it).
 *
 * One statement picks and moves: the jobs FOR UPDATE SKIP LOCKED (a claim on the dead-letter queue
 * takes a job or the move does, never both), their queues FOR KEY SHARE (as an enqueue does: the
 * leader's queue GC cannot delete a queue under jobs moving into it). A moved job starts over, as a
 * redrive does: attempts 0 (its receive count), ready now (after any claim floor), the destination's
 * max_attempts; its error history stays, and it forgets the dead-letter source.
 */
export interface MoveBatch {
  source: string;
  destination: string | null;
  fallback: string | null;
  patterns: string[] | null;
  readyBy: Date;
  limit: number;
}

export interface MovedJobs {
  /** Jobs moved, per destination queue. */
  byQueue: Map<string, number>;
  moved: number;
}

/** Where a job of the batch goes: the queue named, else the one it died in, else the fallback. */
const targetOf = (batch: MoveBatch) =>
  sql`coalesce(${batch.destination}::text, j.meta->'sqs'->>'dead_letter_source', ${batch.fallback}::text)`;

/**
 * The jobs `j` a move has to move: those of its source ready by its start. Moving, counting at the
 * start and counting what is left all read this one definition.
 */
const toMove = (source: string, readyBy: Date) =>
  sql`j.queue = ${source} AND j.state = 'ready' AND j.run_at <= ${readyBy}`;

/** A queue `q` the batch may move a job into. */
const mayReceive = (batch: MoveBatch) =>
  sql`q.name <> ${batch.source} AND ${queueVisible('q.name', batch.patterns ?? undefined)}`;

/** Run in the caller's transaction (the move's row is locked there). */
export async function moveReadyJobs(trx: Db, batch: MoveBatch): Promise<MovedJobs> {
  const { rows } = await sql<ReturnedJob & { group_key: string }>`
    WITH picked AS (
      SELECT j.id, j.slot, q.name AS target, q.max_attempts
      FROM baton.jobs j
      JOIN baton.queues q ON q.name = ${targetOf(batch)}
      WHERE ${toMove(batch.source, batch.readyBy)} AND ${mayReceive(batch)}
      ORDER BY j.priority DESC, j.run_at, j.id
      LIMIT ${batch.limit}
      FOR UPDATE OF j SKIP LOCKED
      FOR KEY SHARE OF q
    )
    UPDATE baton.jobs j
    SET queue = p.target, attempts = 0, run_at = now(),
        max_attempts = coalesce(p.max_attempts, j.max_attempts),
        expires_at = CASE WHEN j.expires_at > now() THEN j.expires_at END,
        progress = NULL,
        meta = CASE WHEN jsonb_typeof(j.meta->'sqs') = 'object' THEN j.meta #- '{sqs,dead_letter_source}'
                    ELSE j.meta END
    FROM picked p
    WHERE j.slot = p.slot AND j.id = p.id
    RETURNING j.id, j.queue, j.unique_key, j.group_key`.execute(trx);
  if (rows.length === 0) return { byQueue: new Map(), moved: 0 };
  // Jobs with a group make their queue grouped, as an enqueue of them does, so its claims serve them.
  const grouped = [...new Set(rows.filter((r) => r.group_key !== '').map((r) => r.queue))];
  if (grouped.length > 0) {
    await sql`UPDATE baton.queues SET grouped = true WHERE name = ANY(${grouped}::text[]) AND NOT grouped`.execute(
      trx,
    );
  }
  // A moved job takes its unique key in its new queue, or gives way to the job holding it there.
  await settleReturnedKeys(trx, rows);
  const byQueue = new Map<string, number>();
  for (const r of rows) byQueue.set(r.queue, (byQueue.get(r.queue) ?? 0) + 1);
  return { byQueue, moved: rows.length };
}

/** Ready jobs of `queue` that were ready by `readyBy`: what a move starting then has to move. */
export async function readyJobsBy(db: Db, queue: string, readyBy: Date): Promise<number> {
  const { rows } = await sql<{ n: string }>`
    SELECT count(*) AS n FROM baton.jobs j WHERE ${toMove(queue, readyBy)}`.execute(db);
  return Number(rows[0]!.n);
}

/**
 * What a batch left of what the move had to move: `left` ready jobs, `unmovable` of them with no
 * queue the batch may move them into. Jobs left that are not unmovable were locked by a claim
 * meanwhile (or arrived by a give-back): the move tries them again.
 */
export async function readyJobsLeft(trx: Db, batch: MoveBatch): Promise<{ left: number; unmovable: number }> {
  const { rows } = await sql<{ left: string; unmovable: string }>`
    SELECT count(*) AS left,
           count(*) FILTER (WHERE NOT EXISTS (
             SELECT 1 FROM baton.queues q WHERE q.name = ${targetOf(batch)} AND ${mayReceive(batch)})) AS unmovable
    FROM baton.jobs j
    WHERE ${toMove(batch.source, batch.readyBy)}`.execute(trx);
  return { left: Number(rows[0]!.left), unmovable: Number(rows[0]!.unmovable) };
}
