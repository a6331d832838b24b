import type { Db } from '../db/database.js';
import { logFieldsOf } from '../db/errors.js';
import { type ReleaseStep, releaseStep, releasesPending } from '../jobs/release.js';
import type { Log } from '../logger.js';
import type { Metrics } from '../metrics/metrics.js';
import type { JobsFinished } from './duty.js';

/** Children per step: one step is one short transaction, whatever the parent's fan-out. */
export const RELEASE_BATCH = 1000;

export interface ReleaseCounts {
  steps: number;
  released: number;
  cancelled: number;
  restored: number;
}

/**
 * Releases children of finished parents, step by step, on every replica (not only the leader: a
 * release is part of the job's lifecycle, and replicas share the work, one parent each at a time).
 *
 * The finishing transaction only files an event (the trigger, migration 0019) and a notice; this
 * loop, woken by that notice (`wake()`, from the LISTEN connection) or by its poll, runs
 * `release_step` until nothing is left, then sleeps. Each step is its own transaction on the
 * releaser's own connection, so a release never sits in the shared ack group, the request pool, the
 * re-arm or any leader duty, and a parent with a million children costs that connection a thousand
 * short steps, taking turns with every other parent's. A failed step (a deadlock between two replicas' steps
 * sharing children, the database away) rolls back whole, is logged and counted, and is tried again
 * after a pause.
 */
export class Releaser {
  private stopped = true;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private again = false;

  constructor(
    private readonly db: Db,
    private readonly metrics: Metrics,
    private readonly log: Log,
    /** Jobs a step cancelled (a parent failed): their awaiters wake. */
    private readonly jobsFinished: JobsFinished,
    /** How long the loop sleeps with nothing to do before it looks again (a missed notice). */
    private readonly pollMs: number,
    private readonly batch = RELEASE_BATCH,
  ) {}

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    this.wake();
  }

  /** A parent finished somewhere: run now (or once more, if a run is under way). */
  wake(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    clearTimeout(this.timer);
    this.running = this.run().finally(() => {
      this.running = undefined;
      if (this.stopped) return;
      const delay = this.again ? 0 : this.pollMs;
      this.again = false;
      this.timer = setTimeout(() => this.wake(), delay);
    });
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running;
  }

  /** One step; counts what it did (tests and operators). */
  async runOnce(): Promise<ReleaseStep | null> {
    const step = await releaseStep(this.db, this.batch);
    if (step) {
      this.metrics.releaseSteps.inc({ outcome: 'ok' });
      this.metrics.releaseEvents.inc(step.events);
      this.metrics.jobsReleased.inc({ outcome: 'ready' }, step.released);
      this.metrics.jobsReleased.inc({ outcome: 'cancelled' }, step.cancelled.length);
      this.metrics.jobsReleased.inc({ outcome: 'restored' }, step.restored);
      if (step.cancelled.length > 0) this.jobsFinished(step.cancelled);
    }
    return step;
  }

  /**
   * Steps until no event is left, here or on another replica (waiting for those): what a test or an
   * operator calls to know every finished parent's children have been told. Bounded by `timeoutMs`.
   */
  async drain(timeoutMs = 30_000): Promise<ReleaseCounts> {
    const counts: ReleaseCounts = { steps: 0, released: 0, cancelled: 0, restored: 0 };
    const until = Date.now() + timeoutMs;
    while (Date.now() < until) {
      const step = await this.runOnce().catch((err) => {
        // Two steps sharing children locked them in another order: one rolled back whole, and runs again.
        if ((err as { code?: string }).code === '40P01') return 'again' as const;
        throw err;
      });
      if (step === 'again') continue;
      if (step) {
        counts.steps++;
        counts.released += step.released;
        counts.cancelled += step.cancelled.length;
        counts.restored += step.restored;
        continue;
      }
      await this.running;
      if (!(await releasesPending(this.db))) return counts;
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    throw new Error(`releases still pending after ${timeoutMs} ms`);
  }

  private async run(): Promise<void> {
    while (!this.stopped) {
      try {
        const step = await this.runOnce();
        if (!step) return;
      } catch (err) {
        this.metrics.releaseSteps.inc({ outcome: 'error' });
        // A deadlock with another replica's step: rolled back whole, and nothing to wait for.
        if ((err as { code?: string }).code === '40P01') continue;
        this.log.warn(logFieldsOf(err), 'a release step failed; it will be tried again');
        await new Promise((resolve) => setTimeout(resolve, Math.min(this.pollMs, 1000)));
        return;
      }
    }
  }
}
