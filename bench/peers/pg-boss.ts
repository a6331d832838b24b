import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import { PgBoss, type WorkOptions } from 'pg-boss';
import { adminPool, DATABASES, databaseUrl, waitUntil } from '../databases.js';
import { produceInBatches } from '../load/produce.js';
import type { QueuePeer } from './peer.js';

/**
 * pg-boss 12 in this process, configured for throughput as its documentation describes: batch fetch
 * (`batchSize`, and `burstWhenBatchFull` so a worker fetches again at once while batches come back
 * full), LISTEN/NOTIFY (`useListenNotify` on the instance, `notify` on each queue) and the shortest
 * allowed polling interval as the fallback. A batch handler that returns completes its whole batch in
 * one statement. pg-boss keeps completed jobs in its job table (state `completed`) until
 * `deleteAfterSeconds`, which is its equivalent of Baton's job history.
 */

export const PG_BOSS = 'pg-boss';

export interface PgBossWorkConfig {
  batchSize: number;
  localConcurrency: number;
}

export const PG_BOSS_BATCHED: PgBossWorkConfig = { batchSize: 100, localConcurrency: 4 };
export const PG_BOSS_SINGLE_16: PgBossWorkConfig = { batchSize: 1, localConcurrency: 16 };

export class PgBossPeer implements QueuePeer<PgBossWorkConfig> {
  readonly database = DATABASES.pgBoss;
  readonly admin: pg.Pool = adminPool(DATABASES.pgBoss);
  private boss: PgBoss | undefined;
  private handled = 0;
  queue = '';
  /** Called with each job id as its handler starts (wake latency uses it). */
  onJob: ((id: string) => void) | undefined;

  async prepare(): Promise<void> {
    const boss = new PgBoss({
      connectionString: databaseUrl(this.database),
      useListenNotify: true,
      schedule: false,
      max: 20,
      application_name: 'pg-boss',
    });
    boss.on('error', (err) => console.error('pg-boss error:', err));
    await boss.start();
    this.boss = boss;
  }

  /** A fresh queue for one measured run (so no run sees another's jobs). */
  async newQueue(): Promise<void> {
    this.queue = `bench_${randomUUID().slice(0, 8)}`;
    await this.boss!.createQueue(this.queue, { notify: true });
  }

  async dropQueue(): Promise<void> {
    if (this.queue) await this.boss!.deleteQueue(this.queue);
    this.queue = '';
  }

  /** Producers: `insert` with `batchSize` jobs per call (1 means `send`), `concurrency` callers. */
  async enqueue(total: number, batchSize: number, concurrency: number, payload = (i: number) => ({ i })) {
    const boss = this.boss!;
    const queue = this.queue;
    await produceInBatches(total, batchSize, concurrency, async (start, n) => {
      if (batchSize === 1) await boss.send(queue, payload(start));
      else
        await boss.insert(
          queue,
          Array.from({ length: n }, (_, k) => ({ data: payload(start + k) })),
        );
    });
  }

  /** Run `fn` on a fresh queue (pg-boss keeps finished jobs in its queue), dropped after. */
  async withQueue<T>(fn: () => Promise<T>): Promise<T> {
    await this.newQueue();
    try {
      return await fn();
    } finally {
      await this.dropQueue();
    }
  }

  async startWorkers(config: PgBossWorkConfig): Promise<void> {
    this.handled = 0;
    const options: WorkOptions = {
      batchSize: config.batchSize,
      localConcurrency: config.localConcurrency,
      pollingIntervalSeconds: 0.5,
      notifyPollingIntervalSeconds: 0.5,
      burstWhenBatchFull: config.batchSize > 1,
    };
    await this.boss!.work(this.queue, options, async (jobs) => {
      this.handled += jobs.length;
      if (this.onJob) for (const job of jobs) this.onJob(job.id);
    });
  }

  /** Resolves at the moment `total` jobs have run and all of them are completed in the table. */
  async waitForCompletion(total: number, timeoutMs: number): Promise<number> {
    await waitUntil(async () => this.handled >= total, timeoutMs, 2);
    return waitUntil(async () => (await this.remaining()) === 0, timeoutMs, 5);
  }

  /** Jobs of the current queue not yet completed. */
  async remaining(): Promise<number> {
    const { rows } = await this.admin.query<{ n: string }>(
      `SELECT count(*) AS n FROM pgboss.job WHERE name = $1 AND state IN ('created', 'retry', 'active')`,
      [this.queue],
    );
    return Number(rows[0]!.n);
  }

  async stopWorkers(): Promise<void> {
    if (this.queue) await this.boss!.offWork(this.queue, { wait: true });
  }

  async close(): Promise<void> {
    await this.boss?.stop({ graceful: true, close: true, timeout: 10_000 });
    await this.admin.end();
  }
}
