/**
 * A maintenance duty: one kind of background work the leader does. `runOnce()` does one bounded
 * round and returns counts (tests call it directly); `nextRunInMs()` says when the scheduler should
 * run it again, given the last result (or undefined after an error), so a duty with a backlog can
 * come back at once and a blocked one can back off.
 */
export interface Duty<R = unknown> {
  readonly name: string;
  runOnce(): Promise<R>;
  nextRunInMs(last: R | undefined): number;
}

/** Who to tell when jobs became ready (wakes long-polling claimers here and on other replicas). */
export type JobsReady = (queue: string, count: number) => void;

/** Who to tell when jobs finished (wakes requests awaiting them here and on other replicas). */
export type JobsFinished = (ids: string[]) => void;

/** How many rows one statement of a duty touches at most. */
export const MAINTENANCE_BATCH = 1000;
