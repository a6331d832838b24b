import type { Db } from '../db/database.js';
import {
  advanceMessageMove,
  type MessageMove,
  pruneMessageMoves,
  runningMessageMoves,
} from '../jobs/message-moves.js';
import { deadLetterRoutes } from '../queues/queue-store.js';
import { type Duty, type JobsReady, MAINTENANCE_BATCH } from './duty.js';

/**
 * Drives the running message moves (jobs/message-moves.ts) on the leader: each run gives every
 * running move one batch, of MAINTENANCE_BATCH jobs, or for a move with a rate, of what the rate
 * allows since its last batch (so a rate of 5 moves 5 jobs a second, in the batches the timer
 * makes). A move with more to do brings the duty back at once; a rated one within a second. Moves
 * that finished 14 days ago are forgotten. Two leaders at once are harmless: a move's batch locks its
 * row, and the other leader skips it.
 */
export interface MessageMovesResult {
  /** Jobs moved this run. */
  moved: number;
  /** Moves still running after it. */
  running: number;
  /** Whether a move without a rate filled its batch (more to do now). */
  more: boolean;
}

export class MessageMovesDuty implements Duty<MessageMovesResult> {
  readonly name = 'message_moves';

  constructor(
    private readonly db: Db,
    private readonly jobsReady: JobsReady,
    private readonly tickMs: number,
    private readonly batchSize = MAINTENANCE_BATCH,
  ) {}

  async runOnce(): Promise<MessageMovesResult> {
    await pruneMessageMoves(this.db);
    let moved = 0;
    let running = 0;
    let more = false;
    for (const move of await runningMessageMoves(this.db)) {
      const limit = this.allowance(move);
      if (limit === 0) {
        running++;
        continue;
      }
      const step = await advanceMessageMove(this.db, move.id, limit, await this.fallback(move));
      if (!step) continue;
      for (const [queue, n] of step.byQueue) this.jobsReady(queue, n);
      moved += step.moved;
      if (step.status !== 'running') continue;
      running++;
      if (move.max_per_second === null && step.moved >= limit) more = true;
    }
    return { moved, running, more };
  }

  nextRunInMs(last: MessageMovesResult | undefined): number {
    if (last?.more) return 0;
    return last && last.running > 0 ? Math.min(this.tickMs, 1000) : this.tickMs;
  }

  /** Jobs this run may move for `move`: a batch, or what its rate allows since its last batch. */
  private allowance(move: MessageMove): number {
    if (move.max_per_second === null) return this.batchSize;
    const elapsedMs = Date.now() - move.progressed_at.getTime();
    const allowed = Math.floor((move.max_per_second * elapsedMs) / 1000);
    // Never more than two seconds' worth at once, after a pause of the leader.
    return Math.max(0, Math.min(allowed, 2 * move.max_per_second, this.batchSize));
  }

  /** Where jobs that do not say where they died go: the source's only dead-letter route, if one. */
  private async fallback(move: MessageMove): Promise<string | null> {
    if (move.destination_queue !== null) return null;
    const routes = await deadLetterRoutes(this.db, move.source_queue);
    return routes.length === 1 ? routes[0]!.queue : null;
  }
}
