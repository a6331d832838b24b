import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BatonApp } from '../../src/app.js';
import { FailoverPair } from '../support/failover/pair.js';
import { runFailoverScenario, startReplicas } from '../support/failover/scenario.js';

/**
 * A real primary and standby under pg_auto_failover (test/support/failover/pair.ts), with three Baton
 * replicas connected through the multi-host URL the monitor prints (target_session_attrs=read-write).
 * Producers and workers run through a planned switchover, then the primary's death by SIGKILL, then
 * its return as the standby (test/support/failover/scenario.ts). With synchronous replication (the pair's
 * default) nothing acknowledged is lost, and no request is answered 500 or left hanging: while no
 * primary writes, requests get 503 with Retry-After and /readyz is false.
 */
describe('PostgreSQL failover under load', () => {
  const dir = join(tmpdir(), `baton-failover-${process.pid}`);
  let pair: FailoverPair;
  let replicas: BatonApp[] = [];
  // A failed run keeps the pair's folder (the keepers' and PostgreSQL's logs) for a look afterwards.
  let keepFiles = false;

  beforeAll(async () => {
    pair = await FailoverPair.start({
      dir,
      basePort: 16300,
    });
    replicas = await startReplicas(pair.url, 3);
  }, 180_000);

  afterAll(async () => {
    for (const app of replicas) await app.close();
    await pair?.stop(!keepFiles);
  });

  it('loses no acknowledged enqueue or ack through a switchover, a killed primary and its return', async ({
    onTestFailed,
  }) => {
    onTestFailed(() => {
      keepFiles = true;
      console.log(`the pair's files and logs are kept in ${dir}`);
    });
    const summary = await runFailoverScenario({ pair, replicas, rounds: 1 });
    console.log(
      `failover: ${summary.enqueued} jobs enqueued, ${summary.acked} acked; claims again ${summary.windows[0]!.toFixed(1)} s after the kill; answers other than success: ${JSON.stringify(summary.failures)}; killed while ${summary.killedWhile}`,
    );
    console.log([...summary.steps, ...summary.events].join('\n'));
    expect(summary.enqueued).toBeGreaterThan(0);
    expect(summary.lostEnqueues).toEqual([]);
    expect(summary.unfinished).toBe(0);
    expect(summary.lostAcks).toEqual([]);
    expect(summary.doubleAcks).toBe(0);
    expect(summary.hung).toBe(0);
    expect(
      Object.keys(summary.failures).filter((status) => Number(status) >= 500 && status !== '503'),
    ).toEqual([]);
    expect(summary.withoutRetryAfter).toBe(0);
    expect(summary.readinessFalseSeen).toBe(true);
    expect(summary.readyAtEnd).toBe(true);
    // The maintenance leader is the one the lease row on the new primary names.
    expect(summary.leadersAtEnd).toBe(1);
    expect(summary.leaseRowNamesLeader).toBe(true);
  }, 300_000);
});
