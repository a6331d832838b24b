import { sql } from 'kysely';
import type { Db } from '../db/database.js';
import { DomainError } from '../errors.js';
import { type MoveBatch, type MovedJobs, moveReadyJobs, readyJobsBy, readyJobsLeft } from './move-ready.js';

/**
 * Message moves: the ready jobs of a dead-letter queue sent back to the queues they died in, or to
 * one named queue, at an optional rate (SQS's message move tasks; migrations/0021_message_moves.ts).
 * Started by a request, driven by the leader in batches (maintenance/message-moves.ts), so a move
 * outlives the replica that started it. What a move has to move is fixed at its start: the jobs
 * ready in the source by then (jobs/move-ready.ts says why). A move is running until nothing it may
 * move is left (completed), it is cancelled, or its source or destination queue goes (failed).
 */
export type MoveStatus = 'running' | 'completed' | 'cancelled' | 'failed';

export interface MessageMove {
  id: string;
  source_queue: string;
  destination_queue: string | null;
  max_per_second: number | null;
  patterns: string[] | null;
  status: MoveStatus;
  moved: string;
  to_move: string;
  failure_reason: string | null;
  started_at: Date;
  progressed_at: Date;
  finished_at: Date | null;
}

export interface NewMove {
  source: string;
  destination: string | null;
  maxPerSecond: number | null;
  /** The starting key's queue patterns (undefined: any queue). */
  patterns: string[] | undefined;
}

/** How long a finished move stays listed, as SQS lists its tasks. */
export const FINISHED_MOVES_KEPT_MS = 14 * 24 * 3600_000;

/** Moves of a queue listed at most. */
export const MOVES_LISTED = 10;

/** Start a move (the caller has checked the queues); move_running if one of the source runs. */
export async function startMessageMove(db: Db, move: NewMove): Promise<MessageMove> {
  return db.transaction().execute(async (trx) => {
    const startedAt = new Date();
    const toMove = await readyJobsBy(trx, move.source, startedAt);
    const { rows } = await sql<MessageMove>`
      INSERT INTO baton.message_moves
        (source_queue, destination_queue, max_per_second, patterns, to_move, started_at, progressed_at)
      VALUES (${move.source}, ${move.destination}, ${move.maxPerSecond}, ${move.patterns ?? null}::text[],
              ${toMove}, ${startedAt}, ${startedAt})
      ON CONFLICT (source_queue) WHERE status = 'running' DO NOTHING
      RETURNING *`.execute(trx);
    if (rows.length === 0) {
      throw new DomainError(
        'move_running',
        `a move of queue "${move.source}" is running: one move of a queue runs at a time (cancel it first)`,
      );
    }
    return rows[0]!;
  });
}

/** A queue's moves, the latest first. */
export async function listMessageMoves(db: Db, source: string, limit: number): Promise<MessageMove[]> {
  const { rows } = await sql<MessageMove>`
    SELECT * FROM baton.message_moves WHERE source_queue = ${source}
    ORDER BY started_at DESC, id LIMIT ${limit}`.execute(db);
  return rows;
}

/**
 * Cancel a running move of `source`: what it moved stays moved. Waits for a batch in flight (it holds
 * the move's row), so the count answered is final. not_found for no such move of that queue,
 * move_finished for one that has ended.
 */
export async function cancelMessageMove(db: Db, source: string, id: string): Promise<MessageMove> {
  const { rows } = await sql<MessageMove>`
    UPDATE baton.message_moves SET status = 'cancelled', finished_at = now()
    WHERE id = ${id}::uuid AND source_queue = ${source} AND status = 'running'
    RETURNING *`.execute(db);
  if (rows.length > 0) return rows[0]!;
  const found = await sql<MessageMove>`
    SELECT * FROM baton.message_moves WHERE id = ${id}::uuid AND source_queue = ${source}`.execute(db);
  if (found.rows.length === 0) throw new DomainError('not_found', `queue "${source}" has no move ${id}`);
  throw new DomainError(
    'move_finished',
    `move ${id} has ended (${found.rows[0]!.status}): only a running move can be cancelled`,
  );
}

/** Every running move (the leader's duty drives them). */
export async function runningMessageMoves(db: Db): Promise<MessageMove[]> {
  const { rows } = await sql<MessageMove>`
    SELECT * FROM baton.message_moves WHERE status = 'running' ORDER BY started_at`.execute(db);
  return rows;
}

export type MoveStep = MovedJobs & { status: MoveStatus };

/**
 * One batch of a running move, with its row locked (a cancel waits for it, and two leaders never
 * run one move's batch at once: the second skips it). `fallback` is the source's only dead-letter
 * route, for jobs that do not say where they died. A batch that moves fewer than `limit` has moved
 * all it may: the move is completed, or failed when jobs it had to move are left that it may not
 * (no source known, a queue gone, a queue the key may not use), or when its source or destination
 * queue is gone.
 */
export async function advanceMessageMove(
  db: Db,
  id: string,
  limit: number,
  fallback: string | null,
): Promise<MoveStep | undefined> {
  return db.transaction().execute(async (trx) => {
    const { rows } = await sql<MessageMove>`
      SELECT * FROM baton.message_moves WHERE id = ${id}::uuid AND status = 'running'
      FOR UPDATE SKIP LOCKED`.execute(trx);
    const move = rows[0];
    if (!move) return undefined;
    const gone = await missingQueue(trx, move);
    if (gone) {
      await finish(trx, id, 0, 'failed', `the ${gone} no longer exists`);
      return { byQueue: new Map(), moved: 0, status: 'failed' };
    }
    const batch: MoveBatch = {
      source: move.source_queue,
      destination: move.destination_queue,
      fallback,
      patterns: move.patterns,
      readyBy: move.started_at,
      limit,
    };
    const result = await moveReadyJobs(trx, batch);
    const { left, unmovable } =
      result.moved >= limit ? { left: 1, unmovable: 0 } : await readyJobsLeft(trx, batch);
    if (left === 0) {
      await finish(trx, id, result.moved, 'completed', null);
      return { ...result, status: 'completed' };
    }
    if (unmovable > 0 && unmovable === left) {
      await finish(trx, id, result.moved, 'failed', unmovableReason(move, unmovable));
      return { ...result, status: 'failed' };
    }
    await sql`
      UPDATE baton.message_moves SET moved = moved + ${result.moved}, progressed_at = now()
      WHERE id = ${id}::uuid`.execute(trx);
    return { ...result, status: 'running' };
  });
}

function unmovableReason(move: MessageMove, n: number): string {
  const where =
    move.destination_queue === null
      ? 'they do not say which queue they died in (and the queue is not the dead-letter queue of exactly one ' +
        'queue), or that queue was deleted, or the key that started the move may not use it; move them with a ' +
        'destination'
      : 'the key that started the move may not use the destination';
  return `${n} message(s) could not be moved: ${where}`;
}

async function missingQueue(trx: Db, move: MessageMove): Promise<string | undefined> {
  const names = [move.source_queue, ...(move.destination_queue ? [move.destination_queue] : [])];
  const { rows } = await sql<{ name: string }>`
    SELECT name FROM baton.queues WHERE name = ANY(${names}::text[])`.execute(trx);
  const found = new Set(rows.map((r) => r.name));
  if (!found.has(move.source_queue)) return `source queue "${move.source_queue}"`;
  if (move.destination_queue && !found.has(move.destination_queue)) {
    return `destination queue "${move.destination_queue}"`;
  }
  return undefined;
}

async function finish(trx: Db, id: string, moved: number, status: MoveStatus, reason: string | null) {
  await sql`
    UPDATE baton.message_moves
    SET moved = moved + ${moved}, progressed_at = now(), finished_at = now(), status = ${status},
        failure_reason = ${reason}
    WHERE id = ${id}::uuid`.execute(trx);
}

/** Forget moves that finished more than FINISHED_MOVES_KEPT_MS ago; how many. */
export async function pruneMessageMoves(db: Db): Promise<number> {
  const result = await sql`
    DELETE FROM baton.message_moves
    WHERE status <> 'running' AND finished_at < now() - ${FINISHED_MOVES_KEPT_MS} * interval '1 millisecond'`.execute(
    db,
  );
  return Number(result.numAffectedRows ?? 0);
}
