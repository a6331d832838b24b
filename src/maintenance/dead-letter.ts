import type { Db } from '../db/database.js';
import { DomainError } from '../errors.js';
import { redriveDeadJobs } from '../jobs/redrive.js';
import type { Log } from '../logger.js';
import { deadLetterRoutes } from '../queues/queue-store.js';
import type { Duty, JobsReady } from './duty.js';

/**
 * Dead-letter forwarding, a maintenance duty the SQS endpoint adds to the leader: the dead jobs of
 * every queue whose RedrivePolicy names a dead-letter queue move to that queue, ready, with their
 * id (so their MessageId), body, attributes and error history, and attempts reset. A message dies
 * when its receive count reaches maxReceiveCount (its lease expired on the last allowed attempt, or
 * its visibility was set to 0 then), so it reaches the dead-letter queue within about a tick of
 * dying. Runs on the leader only; two leaders at once are harmless (the move takes the dead rows
 * FOR UPDATE SKIP LOCKED). A dead-letter queue that was deleted leaves the dead jobs where they are.
 */
export interface DeadLetterResult {
  moved: number;
}

export class DeadLetterDuty implements Duty<DeadLetterResult> {
  readonly name = 'sqs_dead_letter';
  /** Routes into a queue that is gone, already reported (once each, not every tick). */
  private readonly reported = new Set<string>();

  constructor(
    private readonly db: Db,
    private readonly log: Log,
    private readonly jobsReady: JobsReady,
    private readonly tickMs: number,
  ) {}

  async runOnce(): Promise<DeadLetterResult> {
    let moved = 0;
    for (const route of await deadLetterRoutes(this.db)) {
      try {
        const n = await redriveDeadJobs(
          this.db,
          route.queue,
          { all: true },
          { autoCreate: { enabled: false, maxQueues: 0 }, toQueue: route.deadLetterQueue },
        );
        if (n > 0) this.jobsReady(route.deadLetterQueue, n);
        moved += n;
        this.reported.delete(route.queue);
      } catch (err) {
        if (!(err instanceof DomainError && err.code === 'queue_not_found')) throw err;
        if (this.reported.has(route.queue)) continue;
        this.reported.add(route.queue);
        this.log.warn(
          { queue: route.queue, deadLetterQueue: route.deadLetterQueue },
          'the dead-letter queue of a queue is gone; its dead jobs stay where they are',
        );
      }
    }
    return { moved };
  }

  nextRunInMs(): number {
    return this.tickMs;
  }
}
