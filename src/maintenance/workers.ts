import type { Db } from '../db/database.js';
import { pruneWorkers } from '../jobs/workers.js';
import type { Duty } from './duty.js';

/**
 * Forget workers that announced themselves and have been silent for a day (jobs/workers.ts): they
 * stopped being listed long before (BATON_WORKER_SILENCE_MS); this only reclaims their rows. Once a
 * minute is plenty.
 */
export class WorkersDuty implements Duty<{ forgotten: number }> {
  readonly name = 'workers';

  constructor(private readonly db: Db) {}

  async runOnce(): Promise<{ forgotten: number }> {
    return { forgotten: await pruneWorkers(this.db) };
  }

  nextRunInMs(): number {
    return 60_000;
  }
}
