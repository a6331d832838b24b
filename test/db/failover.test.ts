import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FailoverPair, type NodeName } from '../../bench/failover/pair.js';
import type { BatonApp } from '../../src/app.js';
import { createDatabase } from '../../src/db/database.js';
import { migrateToLatest } from '../../src/db/migrate.js';
import { createTestApp, testConfig } from '../support/app.js';

/**
 * A real primary and standby under pg_auto_failover (bench/failover/pair.ts), with Baton connected
 * through the multi-host URL the monitor prints (target_session_attrs=read-write). Producers and
 * workers run through a planned switchover, then the primary's death by SIGKILL, then its return
 * as the standby. With synchronous replication (the pair's default) nothing acknowledged is lost:
 * every job answered 201 is there and completed at the end, every ack answered 200 stands, and no
 * request is answered 500 or left hanging: while no primary writes, requests get 503 with
 * Retry-After and /readyz is false.
 */

const REQUEST_LIMIT_MS = 15_000;

interface Ledger {
  enqueued: Set<string>;
  /** Acks answered 200, per job, by lease token. */
  acked: Map<string, Set<string>>;
  /** Every answer that was not a success, by status. */
  failures: Map<number, number>;
  withoutRetryAfter: number;
  /** performance.now() of each successful claim that handed out jobs. */
  claims: number[];
}

describe('PostgreSQL failover under load', () => {
  let pair: FailoverPair;
  let app: BatonApp;

  beforeAll(async () => {
    pair = await FailoverPair.start({
      dir: join(tmpdir(), `baton-failover-${process.pid}`),
      basePort: 16300,
    });
    const config = testConfig();
    const migrator = createDatabase(pair.url, config, console as never, 'maintenance');
    await migrateToLatest(migrator.db);
    await migrator.close();
    app = await createTestApp(
      { url: pair.url },
      { BATON_MAINTENANCE: 'true', BATON_TICK_MS: '500', BATON_DB_CONNECT_TIMEOUT_MS: '2000' },
    );
  }, 180_000);

  afterAll(async () => {
    await app?.close();
    await pair?.stop();
  });

  it('loses no acknowledged enqueue or ack through a switchover, a killed primary and its return', async () => {
    const ledger: Ledger = {
      enqueued: new Set(),
      acked: new Map(),
      failures: new Map(),
      withoutRetryAfter: 0,
      claims: [],
    };
    const request = async (method: 'GET' | 'POST', url: string, payload?: object) => {
      const res = await Promise.race([
        app.inject({ method, url, ...(payload ? { payload } : {}) }),
        new Promise<never>((_, reject) =>
          setTimeout(
            () => reject(new Error(`${method} ${url} hung past ${REQUEST_LIMIT_MS} ms`)),
            REQUEST_LIMIT_MS,
          ),
        ),
      ]);
      if (res.statusCode >= 300) {
        ledger.failures.set(res.statusCode, (ledger.failures.get(res.statusCode) ?? 0) + 1);
        if (res.statusCode === 503 && res.headers['retry-after'] === undefined) ledger.withoutRetryAfter++;
      }
      return res;
    };

    let producing = true;
    const produce = async () => {
      for (let n = 0; producing; n++) {
        const res = await request('POST', '/v1/queues/fo/jobs/batch', {
          jobs: Array.from({ length: 5 }, (_, k) => ({ payload: { n, k } })),
        });
        if (res.statusCode === 201) for (const job of res.json().jobs) ledger.enqueued.add(job.id);
        else await new Promise((r) => setTimeout(r, 100));
      }
    };
    let working = true;
    const work = async (worker: string) => {
      while (working) {
        const res = await request('POST', '/v1/queues/fo/claim', {
          max_jobs: 10,
          wait_ms: 200,
          worker_id: worker,
        });
        if (res.statusCode !== 200) {
          await new Promise((r) => setTimeout(r, 100));
          continue;
        }
        const jobs: { id: string; lease_token: string }[] = res.json().jobs;
        if (jobs.length > 0) ledger.claims.push(performance.now());
        for (const job of jobs) {
          // An ack that meets the outage is sent again with the same lease until it is answered.
          for (let attempt = 0; attempt < 100; attempt++) {
            const ack = await request('POST', `/v1/jobs/${job.id}/ack`, { lease_token: job.lease_token });
            if (ack.statusCode === 200) {
              const leases = ledger.acked.get(job.id) ?? new Set<string>();
              leases.add(job.lease_token);
              ledger.acked.set(job.id, leases);
              break;
            }
            if (ack.statusCode === 409) break;
            await new Promise((r) => setTimeout(r, 200));
          }
        }
      }
    };
    const readiness: number[] = [];
    let probing = true;
    const probe = async () => {
      while (probing) {
        readiness.push((await request('GET', '/readyz')).statusCode);
        await new Promise((r) => setTimeout(r, 200));
      }
    };

    const running = [produce(), work('w1'), work('w2'), probe()];
    const settle = (ms: number) => new Promise((r) => setTimeout(r, ms));
    await settle(2000);
    const beforeSwitchover = ledger.enqueued.size;
    expect(beforeSwitchover).toBeGreaterThan(0);

    await pair.switchover();
    await settle(2000);

    const primary = (await pair.primary()) as NodeName;
    const killedAt = performance.now();
    pair.kill(primary);
    // Service comes back on the standby, promoted by the monitor.
    while (!ledger.claims.some((t) => t > killedAt) && performance.now() - killedAt < 60_000)
      await settle(200);
    const windowSeconds = (ledger.claims.find((t) => t > killedAt)! - killedAt) / 1000;
    await settle(2000);
    pair.restart(primary);
    await pair.settled();
    await settle(2000);

    producing = false;
    await running[0];
    // Drain: every acknowledged job gets worked.
    const deadline = performance.now() + 60_000;
    while (performance.now() < deadline && [...ledger.enqueued].some((id) => !ledger.acked.has(id)))
      await settle(200);
    working = false;
    probing = false;
    await Promise.all(running);

    const completed = new Set(
      (
        await sql<{
          id: string;
        }>`SELECT id::text AS id FROM baton.job_history WHERE queue = 'fo' AND state = 'completed'`.execute(
          app.db,
        )
      ).rows.map((r) => r.id),
    );
    const lostEnqueues = [...ledger.enqueued].filter((id) => !completed.has(id));
    const lostAcks = [...ledger.acked.keys()].filter((id) => !completed.has(id));
    const doubleAcks = [...ledger.acked.values()].filter((leases) => leases.size > 1).length;
    console.log(
      `failover: ${ledger.enqueued.size} jobs enqueued, ${ledger.acked.size} acked; without service ${windowSeconds.toFixed(1)} s after the kill; answers other than success: ${JSON.stringify(Object.fromEntries(ledger.failures))}`,
    );
    expect(lostEnqueues).toEqual([]);
    expect(lostAcks).toEqual([]);
    expect(doubleAcks).toBe(0);
    expect([...ledger.failures.keys()].filter((status) => status >= 500 && status !== 503)).toEqual([]);
    expect(ledger.withoutRetryAfter).toBe(0);
    // Not ready while no primary answered, and ready again at the end.
    expect(readiness).toContain(503);
    expect(readiness.at(-1)).toBe(200);
    expect(ledger.enqueued.size).toBeGreaterThan(beforeSwitchover);
  }, 300_000);
});
