import type pg from 'pg';

/** What the scenarios need of an in-process peer queue (graphile-worker, pg-boss). */
export interface QueuePeer<Config> {
  readonly database: string;
  readonly admin: pg.Pool;
  /** Called as each job's handler starts. */
  onJob: ((job: never) => void) | undefined;
  enqueue(total: number, batchSize: number, concurrency: number): Promise<void>;
  startWorkers(config: Config): Promise<void>;
  /** Resolves (with performance.now()) when `total` jobs have run and none is left. */
  waitForCompletion(total: number, timeoutMs: number): Promise<number>;
  remaining(): Promise<number>;
  stopWorkers(): Promise<void>;
  /** Run `fn` with a fresh queue where the peer needs one (pg-boss), dropping it after. */
  withQueue<T>(fn: () => Promise<T>): Promise<T>;
}
