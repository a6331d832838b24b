import {
  type Job,
  Logger,
  makeWorkerUtils,
  type Runner,
  run,
  runMigrations,
  type WorkerUtils,
} from 'graphile-worker';
import type pg from 'pg';
import { adminPool, DATABASES, databaseUrl, waitUntil } from '../databases.js';
import { produceInBatches } from '../load/produce.js';
import type { QueuePeer } from './peer.js';

/**
 * graphile-worker 0.18 in this process, configured as its performance page recommends for
 * throughput: a local queue (jobs fetched and locked in batches, handed to the pool's workers
 * without a round trip each) and batched completion (completeJobBatchDelay 0). For the
 * one-job-at-a-time scenario it runs without either, at concurrency 16.
 *
 * Completed graphile jobs are deleted (it keeps no history), so "done" is: every handler ran and
 * the jobs table is empty again.
 */

export const GRAPHILE = 'graphile-worker';
const TASK = 'bench';
const silent = new Logger(() => () => {});

export interface GraphileConfig {
  concurrency: number;
  /** Local queue size; undefined for none (one fetch per job). */
  localQueueSize?: number;
  /** Batched completion delay in ms; undefined for none (one completion statement per job). */
  completeJobBatchDelay?: number;
  maxPoolSize: number;
}

/** The performance page's configuration (docs: worker.graphile.org/docs/performance). */
export const GRAPHILE_TUNED: GraphileConfig = {
  concurrency: 24,
  localQueueSize: 500,
  completeJobBatchDelay: 0,
  maxPoolSize: 25,
};

/** One job per fetch and per completion, 16 at a time. */
export const GRAPHILE_SINGLE_16: GraphileConfig = { concurrency: 16, maxPoolSize: 18 };

export class GraphilePeer implements QueuePeer<GraphileConfig> {
  readonly database = DATABASES.graphile;
  readonly admin: pg.Pool = adminPool(DATABASES.graphile);
  private utils: WorkerUtils | undefined;
  private runner: Runner | undefined;
  private handled = 0;
  /** Called with each job as its handler starts (wake latency uses it). */
  onJob: ((job: Job) => void) | undefined;

  async prepare(): Promise<void> {
    const connectionString = databaseUrl(this.database);
    await runMigrations({ connectionString, logger: silent });
    this.utils = await makeWorkerUtils({ connectionString, logger: silent, maxPoolSize: 16 });
  }

  /** Producers: `addJobs` with `batchSize` jobs per call (1 means `addJob`), `concurrency` callers. */
  async enqueue(total: number, batchSize: number, concurrency: number, payload = (i: number) => ({ i })) {
    const utils = this.utils!;
    await produceInBatches(total, batchSize, concurrency, async (start, n) => {
      if (batchSize === 1) await utils.addJob(TASK, payload(start));
      else
        await utils.addJobs(
          Array.from({ length: n }, (_, k) => ({ identifier: TASK, payload: payload(start + k) })),
        );
    });
  }

  /** graphile-worker needs no queue of its own: `fn` just runs. */
  withQueue<T>(fn: () => Promise<T>): Promise<T> {
    return fn();
  }

  async startWorkers(config: GraphileConfig): Promise<void> {
    this.handled = 0;
    this.runner = await run({
      taskList: {
        [TASK]: async (_payload, helpers) => {
          this.handled++;
          this.onJob?.(helpers.job);
        },
      },
      crontab: '',
      noHandleSignals: true,
      logger: silent,
      preset: {
        worker: {
          connectionString: databaseUrl(this.database),
          concurrentJobs: config.concurrency,
          maxPoolSize: config.maxPoolSize,
          pollInterval: 2000,
          ...(config.localQueueSize ? { localQueue: { size: config.localQueueSize } } : {}),
          ...(config.completeJobBatchDelay !== undefined
            ? {
                completeJobBatchDelay: config.completeJobBatchDelay,
                failJobBatchDelay: config.completeJobBatchDelay,
              }
            : {}),
        },
      },
    });
  }

  /** Resolves at the moment `total` jobs have run and none is left in the table. */
  async waitForCompletion(total: number, timeoutMs: number): Promise<number> {
    await waitUntil(async () => this.handled >= total, timeoutMs, 2);
    return waitUntil(async () => (await this.remaining()) === 0, timeoutMs, 5);
  }

  async remaining(): Promise<number> {
    const { rows } = await this.admin.query<{ n: string }>(
      'SELECT count(*) AS n FROM graphile_worker._private_jobs',
    );
    return Number(rows[0]!.n);
  }

  async stopWorkers(): Promise<void> {
    await this.runner?.stop();
    this.runner = undefined;
  }

  async close(): Promise<void> {
    await this.stopWorkers();
    await this.utils?.release();
    await this.admin.end();
  }
}
