import { invalidField, queueNotFound } from '../errors.js';
import {
  cancelMessageMove,
  listMessageMoves,
  type MessageMove,
  MOVES_LISTED,
  startMessageMove,
} from '../jobs/message-moves.js';
import { deadLetterRoutes, getQueue } from '../queues/queue-store.js';
import type { ServiceDeps } from './jobs.js';

/**
 * Message moves, whichever protocol asks (SQS's StartMessageMoveTask and its kin, the native
 * /v1/queues/{queue}/moves): a dead-letter queue's ready jobs sent back to the queues they died in,
 * or to a named queue. The leader does the moving (maintenance/message-moves.ts); these start,
 * list and cancel. The caller has checked that its key may use both queues; the key's patterns go
 * with the move, so the leader moves jobs only into queues that key may use.
 */
export interface StartMove {
  source: string;
  /** Undefined: each job back to the queue it died in. */
  destination?: string;
  maxPerSecond?: number;
  patterns: string[] | undefined;
}

export class MoveUseCases {
  constructor(private readonly deps: ServiceDeps) {}

  async start(move: StartMove): Promise<MessageMove> {
    const { db } = this.deps;
    if (!(await getQueue(db, move.source))) throw queueNotFound(move.source);
    if (move.destination !== undefined) {
      if (move.destination === move.source) {
        throw invalidField('destination', 'must be another queue than the one the jobs move from');
      }
      if (!(await getQueue(db, move.destination))) throw queueNotFound(move.destination);
    } else if ((await deadLetterRoutes(db, move.source)).length === 0) {
      throw invalidField(
        'destination',
        `is required: queue "${move.source}" is no queue's dead-letter queue, so its jobs have no queue to go back to`,
      );
    }
    return startMessageMove(db, {
      source: move.source,
      destination: move.destination ?? null,
      maxPerSecond: move.maxPerSecond ?? null,
      patterns: move.patterns,
    });
  }

  /** A queue's moves, the latest first (at most MOVES_LISTED). */
  async list(source: string, limit = MOVES_LISTED): Promise<MessageMove[]> {
    if (!(await getQueue(this.deps.db, source))) throw queueNotFound(source);
    return listMessageMoves(this.deps.db, source, Math.min(limit, MOVES_LISTED));
  }

  /** The queues whose dead jobs come to `queue` (and so where a move sends them back), those `patterns` allow. */
  async sources(queue: string, patterns: string[] | undefined): Promise<string[]> {
    return (await deadLetterRoutes(this.deps.db, queue, patterns)).map((r) => r.queue);
  }

  cancel(source: string, id: string): Promise<MessageMove> {
    return cancelMessageMove(this.deps.db, source, id);
  }
}
