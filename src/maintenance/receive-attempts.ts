import type { Db } from '../db/database.js';
import { pruneReceiveAttempts } from '../jobs/receive-attempts.js';
import { type Duty, MAINTENANCE_BATCH } from './duty.js';

/**
 * Forget SQS FIFO receive attempts past their five minutes (jobs/receive-attempts.ts), oldest first
 * by created_at, in bounded batches. An attempt past the window is already ignored by a receive; this
 * only reclaims the space. Added by the SQS endpoint (plugins/sqs.ts), the only writer of the table.
 */
export class ReceiveAttemptsDuty implements Duty<number> {
  readonly name = 'sqs_receive_attempts';
  constructor(
    private readonly db: Db,
    private readonly tickMs: number,
    private readonly batchSize = MAINTENANCE_BATCH,
  ) {}

  runOnce(): Promise<number> {
    return pruneReceiveAttempts(this.db, this.batchSize);
  }

  nextRunInMs(last: number | undefined): number {
    return last !== undefined && last >= this.batchSize ? 0 : this.tickMs;
  }
}
