import { sql } from 'kysely';
import { type BatonApp, buildApp } from '../../../src/app.js';
import { loadConfig } from '../../../src/config.js';
import { createDatabase } from '../../../src/db/database.js';
import { migrateToLatest } from '../../../src/db/migrate.js';
import { noLog } from '../../../src/logger.js';
import type { FailoverPair, NodeName } from './pair.js';

/**
 * Producers and workers through database failovers, over Baton replicas connected to a
 * pg_auto_failover pair by its multi-host URL; what was acknowledged is checked against what the
 * surviving primary holds at the end. Run by test/db/failover.test.ts (synchronous replication,
 * every invariant asserted) and bench/failover/run.ts (several rounds, synchronous or not, figures
 * reported).
 *
 * Each round: a planned switchover, then the primary killed (SIGKILL of its keeper and PostgreSQL),
 * then the killed node back as the standby. Producers enqueue batches of 5 and keep the ids answered
 * 201; workers claim 10, then ack them in one request until it is answered (the same leases again
 * after a 503), and keep the jobs answered `acked` with their lease tokens; a probe asks /readyz.
 * A request that takes longer than REQUEST_LIMIT_MS counts as hung.
 */

export const REQUEST_LIMIT_MS = 15_000;

export interface FailoverSummary {
  rounds: number;
  enqueued: number;
  acked: number;
  /** Jobs answered 201 that the primary does not hold at the end, in any state. */
  lostEnqueues: string[];
  /** Jobs answered 201 not yet completed when the drain ended (a backlog, not a loss). */
  unfinished: number;
  /** Jobs whose ack was answered 200 that are not completed at the end. */
  lostAcks: string[];
  /** Jobs acked (200) under two different leases. */
  doubleAcks: number;
  /** Answers other than success, by status. */
  failures: Record<number, number>;
  withoutRetryAfter: number;
  hung: number;
  /** Seconds from each kill to the first claim that handed out jobs after it. */
  windows: number[];
  /** Seconds of 503 answers around each switchover (first to last). */
  switchoverWindows: number[];
  readinessFalseSeen: boolean;
  readyAtEnd: boolean;
  /** Replicas that hold the maintenance lease at the end by their own account (one is right). */
  leadersAtEnd: number;
  /** Whether the lease row on the surviving primary names that leader. */
  leaseRowNamesLeader: boolean;
  /** How each killed primary replicated the moment before it died (see FailoverPair.replication). */
  killedWhile: string[];
  /** The monitor's state changes over the run, when anything acknowledged was lost (else empty). */
  events: string[];
  /** Each step of the run with the greatest job id answered 201 before it (to place a loss). */
  steps: string[];
}

const settle = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * `n` Baton replicas in this process over the pair's multi-host URL, schema migrated first: each with
 * its own pools, LISTEN connection and leader election, the leader's duties on (tick 500 ms).
 */
export async function startReplicas(url: string, n: number): Promise<BatonApp[]> {
  const config = loadConfig({
    LOG_LEVEL: 'silent',
    BATON_TICK_MS: '500',
    BATON_DB_CONNECT_TIMEOUT_MS: '2000',
    BATON_SHED_EVENT_LOOP_DELAY_MS: '0',
  });
  const migrator = createDatabase(url, config, noLog, 'maintenance');
  await migrateToLatest(migrator.db);
  await migrator.close();
  const replicas: BatonApp[] = [];
  for (let i = 0; i < n; i++) {
    const app = await buildApp({ config, databaseUrl: url });
    await app.ready();
    replicas.push(app);
  }
  return replicas;
}

export async function runFailoverScenario(opts: {
  pair: FailoverPair;
  replicas: BatonApp[];
  rounds: number;
  queue?: string;
  log?: (line: string) => void;
}): Promise<FailoverSummary> {
  const { pair, replicas, rounds } = opts;
  const queue = opts.queue ?? 'failover';
  const log = opts.log ?? (() => {});
  const enqueued = new Set<string>();
  const acked = new Map<string, Set<string>>();
  const failures: Record<number, number> = {};
  const unavailableAt: number[] = [];
  const claims: number[] = [];
  const readiness: number[] = [];
  let withoutRetryAfter = 0;
  let hung = 0;
  let turn = 0;

  // Requests go to the replicas in turn, as a load balancer would send them.
  const request = async (method: 'GET' | 'POST', url: string, payload?: object) => {
    const app = replicas[turn++ % replicas.length]!;
    let timer: NodeJS.Timeout | undefined;
    try {
      const res = await Promise.race([
        app.inject({ method, url, ...(payload ? { payload } : {}) }),
        new Promise<undefined>((resolve) => {
          timer = setTimeout(() => resolve(undefined), REQUEST_LIMIT_MS);
        }),
      ]);
      if (!res) {
        hung++;
        return undefined;
      }
      if (res.statusCode >= 300) {
        failures[res.statusCode] = (failures[res.statusCode] ?? 0) + 1;
        if (res.statusCode === 503) {
          unavailableAt.push(performance.now());
          if (res.headers['retry-after'] === undefined) withoutRetryAfter++;
        }
      }
      return res;
    } finally {
      clearTimeout(timer);
    }
  };

  let producing = true;
  const produce = async (producer: number) => {
    for (let n = 0; producing; n++) {
      const res = await request('POST', `/v1/queues/${queue}/jobs/batch`, {
        jobs: Array.from({ length: 5 }, (_, k) => ({ payload: { producer, n, k } })),
      });
      if (res?.statusCode === 201) for (const job of res.json().jobs) enqueued.add(job.id);
      else await settle(100);
    }
  };
  let working = true;
  const work = async (worker: string) => {
    while (working) {
      const asked = performance.now();
      const res = await request('POST', `/v1/queues/${queue}/claim`, {
        max_jobs: 10,
        wait_ms: 200,
        worker_id: worker,
      });
      if (res?.statusCode !== 200) {
        await settle(100);
        continue;
      }
      const jobs: { id: string; lease_token: string }[] = res.json().jobs;
      // When the claim was asked, so one already under way at a kill does not count as service.
      if (jobs.length > 0) claims.push(asked);
      // One batch ack per claim; sent again with the same leases after a 503, until answered.
      for (let attempt = 0; attempt < 100 && jobs.length > 0; attempt++) {
        const ack = await request('POST', '/v1/jobs/ack', {
          acks: jobs.map((job) => ({ id: job.id, lease_token: job.lease_token })),
        });
        if (ack?.statusCode !== 200) {
          await settle(200);
          continue;
        }
        const results: { id: string; outcome: string }[] = ack.json().results;
        for (const [k, result] of results.entries()) {
          if (result.outcome !== 'acked') continue;
          const leases = acked.get(result.id) ?? new Set<string>();
          leases.add(jobs[k]!.lease_token);
          acked.set(result.id, leases);
        }
        break;
      }
    }
  };
  let probing = true;
  const probe = async () => {
    while (probing) {
      const res = await request('GET', '/readyz');
      if (res) readiness.push(res.statusCode);
      await settle(200);
    }
  };

  const producers = [produce(0), produce(1)];
  const others = [work('w1'), work('w2'), work('w3'), probe()];
  const windows: number[] = [];
  const steps: string[] = [];
  const startedAt = performance.now();
  const step = (what: string) => {
    let top = 0;
    for (const id of enqueued) top = Math.max(top, Number(id));
    steps.push(`${((performance.now() - startedAt) / 1000).toFixed(1)} s, ids to ${top}: ${what}`);
  };
  const killedWhile: string[] = [];
  const switchoverWindows: number[] = [];
  const stopAll = async () => {
    producing = false;
    working = false;
    probing = false;
    await Promise.allSettled([...producers, ...others]);
  };
  const failOver = async () => {
    await settle(2000);
    for (let round = 1; round <= rounds; round++) {
      const switchedAt = performance.now();
      step('switchover asked');
      await pair.switchover();
      step('switchover done');
      await settle(2000);
      const during = unavailableAt.filter((t) => t >= switchedAt);
      switchoverWindows.push(during.length ? (during.at(-1)! - during[0]!) / 1000 : 0);
      log(
        `round ${round}: switched over to ${await pair.primary()} (503s for ${switchoverWindows.at(-1)!.toFixed(1)} s)`,
      );

      const primary = (await pair.primary()) as NodeName;
      // A synchronous pair's promise holds only while the monitor has it synchronous: after the
      // switchover it runs asynchronously (wait_primary) until its new standby has caught up.
      if (pair.synchronous) {
        await pair.untilSynchronous(primary);
        // What it acknowledged while it ran asynchronously is on the standby too, once this returns.
        await pair.untilStandbyFlushed(primary);
      }
      killedWhile.push(JSON.stringify(await pair.replication(primary)));
      const killedAt = performance.now();
      step(`${primary} killed`);
      pair.kill(primary);
      while (!claims.some((t) => t > killedAt) && performance.now() - killedAt < 120_000) await settle(100);
      const served = claims.find((t) => t > killedAt);
      windows.push(served === undefined ? Number.POSITIVE_INFINITY : (served - killedAt) / 1000);
      log(`round ${round}: killed ${primary}; claims again after ${windows.at(-1)!.toFixed(1)} s`);
      await settle(2000);
      step('claims served again');
      pair.restart(primary);
      step(`${primary} restarted`);
      await pair.settled();
      step('settled');
      log(`round ${round}: ${primary} back as the standby`);
      await settle(2000);
    }
  };
  try {
    await failOver();
  } catch (err) {
    await stopAll();
    throw err;
  }

  producing = false;
  await Promise.all(producers);
  step('producers stopped');
  // Drain: every acknowledged job gets worked (or the checks below name it).
  const deadline = performance.now() + 60_000;
  while (performance.now() < deadline && [...enqueued].some((id) => !acked.has(id))) await settle(200);
  working = false;
  probing = false;
  await Promise.all(others);

  const db = replicas[0]!.db;
  const { rows } = await sql<{ id: string; state: string }>`
    SELECT id::text AS id, state::text AS state FROM baton.job_history WHERE queue = ${queue}
    UNION ALL SELECT id::text, state::text FROM baton.jobs WHERE queue = ${queue}
    UNION ALL SELECT id::text, 'scheduled' FROM baton.scheduled_jobs WHERE queue = ${queue}`.execute(db);
  const held = new Set(rows.map((r) => r.id));
  // The leader is whoever the lease row on the new primary names, once a tick has passed.
  await settle(2000);
  const leaders = replicas.filter((app) => app.maintainer?.isLeader);
  const lease = await sql<{ holder: string }>`
    SELECT holder FROM baton.leader WHERE name = 'maintenance' AND expires_at > now()`.execute(db);
  const completed = new Set(rows.filter((r) => r.state === 'completed').map((r) => r.id));
  const lostEnqueues = [...enqueued].filter((id) => !held.has(id));
  const lostAcks = [...acked.keys()].filter((id) => !completed.has(id));
  return {
    rounds,
    enqueued: enqueued.size,
    acked: acked.size,
    lostEnqueues,
    unfinished: [...enqueued].filter((id) => !completed.has(id)).length,
    lostAcks,
    doubleAcks: [...acked.values()].filter((leases) => leases.size > 1).length,
    failures,
    withoutRetryAfter,
    hung,
    windows,
    switchoverWindows,
    readinessFalseSeen: readiness.includes(503),
    readyAtEnd: readiness.at(-1) === 200,
    leadersAtEnd: leaders.length,
    leaseRowNamesLeader:
      leaders.length === 1 && lease.rows[0]?.holder === leaders[0]!.maintainer!.leadership.holder,
    killedWhile,
    steps,
    events: lostEnqueues.length + lostAcks.length > 0 ? await pair.events() : [],
  };
}
