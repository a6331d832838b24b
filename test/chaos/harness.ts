import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { createBatonClient } from '../../openapi/client.js';
import { createDatabase } from '../../src/db/database.js';
import { type EmbeddedPostgres, startEmbeddedPostgres } from '../../src/db/embedded-postgres.js';
import { migrateToLatest } from '../../src/db/migrate.js';
import { noLog } from '../../src/logger.js';
import { freePort } from '../support/ports.js';
import { ServerProcess } from '../support/server-process.js';
import { checkLedger, type FinalJob, type LedgerEntry, type Violations, violationCount } from './ledger.js';
import { Random } from './random.js';

/**
 * The chaos harness: several Baton server processes on one PostgreSQL that the harness owns
 * (an embedded one, so it may restart it), many worker processes, a producer, and a driver that on
 * a schedule drawn from a printed seed SIGKILLs server replicas (the leader too) and workers,
 * terminates Baton's database connections and, once per run, restarts PostgreSQL. At the end it
 * lets the queue drain and checks the workers' ledgers against the database (see ledger.ts).
 */

export interface ChaosOptions {
  seed: number;
  durationMs: number;
  jobs: number;
  replicas?: number;
  workers?: number;
  leaseMs?: number;
  tickMs?: number;
  log?: (line: string) => void;
}

export interface ChaosSummary {
  seed: number;
  durationMs: number;
  jobs: number;
  /** Jobs of the run that had parents (workflows). */
  workflowChildren: number;
  completed: number;
  dead: number;
  kills: { server: number; worker: number; backends: number; postgres: number };
  rearmed: number;
  deliveries: number;
  duplicates: number;
  lost: number;
  responses503: number;
  violations: Violations;
  ok: boolean;
}

const QUEUE = 'chaos';
const POISON_RATE = 0.01;
/** Share of the producer's batches that are small workflows (jobs with parents in the same batch). */
const WORKFLOW_RATE = 0.2;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function runChaos(opts: ChaosOptions): Promise<ChaosSummary> {
  const log = opts.log ?? (() => {});
  const random = new Random(opts.seed);
  const replicas = opts.replicas ?? 3;
  const workerCount = opts.workers ?? 6;
  const leaseMs = opts.leaseMs ?? 2000;
  const tickMs = opts.tickMs ?? 1000;
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'baton-chaos-'));
  await fs.chmod(dir, 0o755);
  const pgPort = await freePort();
  const quiet = noLog;
  const startPostgres = () =>
    startEmbeddedPostgres({ dataDir: path.join(dir, 'pgdata'), port: pgPort, log: quiet });
  let postgres: EmbeddedPostgres = await startPostgres();
  const handle = createDatabase(
    postgres.url,
    { poolSize: 2, statementTimeoutMs: 60_000, connectTimeoutMs: 5000 },
    quiet,
  );
  await migrateToLatest(handle.db);
  await handle.close();

  const kills = { server: 0, worker: 0, backends: 0, postgres: 0 };
  const env = {
    DATABASE_URL: postgres.url,
    BATON_TICK_MS: String(tickMs),
    BATON_PROMOTE_INTERVAL_MS: '200',
    BATON_SHUTDOWN_TIMEOUT_MS: '2000',
    BATON_DB_CONNECT_TIMEOUT_MS: '2000',
    LOG_LEVEL: 'error',
  };
  const ports = await Promise.all(Array.from({ length: replicas }, () => freePort()));
  const servers: (ServerProcess | undefined)[] = await Promise.all(
    ports.map((port) => ServerProcess.start(env, port)),
  );
  const urls = ports.map((p) => `http://127.0.0.1:${p}`);

  // --- workers ---------------------------------------------------------------------------------
  const ledgers: string[] = [];
  const workers = new Set<ChildProcess>();
  let workerSeq = 0;
  const startWorker = () => {
    const ledger = path.join(dir, `ledger-${workerSeq}.jsonl`);
    ledgers.push(ledger);
    const child = spawn(process.execPath, ['--import', 'tsx', 'test/chaos/worker.ts'], {
      env: {
        ...process.env,
        URLS: urls.join(','),
        QUEUE,
        LEDGER: ledger,
        SEED: String(opts.seed * 1000 + workerSeq++),
        LEASE_MS: String(leaseMs),
      },
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    workers.add(child);
    child.on('exit', () => workers.delete(child));
  };
  for (let i = 0; i < workerCount; i++) startWorker();

  // --- producer: idempotency keys make every retry safe -------------------------------------------
  const enqueued = new Map<string, 'normal' | 'poison'>();
  /** Each workflow child's parents, to check that no child ran before its parents completed. */
  const parentsOf = new Map<string, string[]>();
  const clients = urls.map((baseUrl) => createBatonClient({ baseUrl }));
  const produce = async () => {
    const spread = opts.durationMs * 0.6;
    const started = Date.now();
    let seq = 0;
    while (seq < opts.jobs) {
      const workflow = random.chance(WORKFLOW_RATE);
      const size = Math.min(workflow ? 2 + random.int(6) : 1 + random.int(50), opts.jobs - seq);
      // A workflow: item 0 is the root, each later item names one or two earlier items as parents; with
      // idempotency keys like every batch, so a retry answers the same graph. Never poison, so every
      // job of a graph must complete.
      const batch = Array.from({ length: size }, (_, i) => {
        const kind = !workflow && random.chance(POISON_RATE) ? ('poison' as const) : ('normal' as const);
        if (workflow) {
          const parents = i === 0 ? [] : [...new Set([random.int(i), random.int(i)])];
          return {
            payload: { kind, seq: seq + i },
            idempotency_key: `k-${seq + i}`,
            max_attempts: 1000,
            ...(parents.length > 0 ? { depends_on: parents.map((item) => ({ item })) } : {}),
          };
        }
        return {
          payload: { kind, seq: seq + i },
          idempotency_key: `k-${seq + i}`,
          max_attempts: kind === 'poison' ? 3 : 1000,
        };
      });
      while (true) {
        try {
          const { data, response } = await random.pick(clients).POST('/v1/queues/{queue}/jobs/batch', {
            params: { path: { queue: QUEUE } },
            body: { jobs: batch },
          });
          if (response.status === 201 && data) {
            data.jobs.forEach((job, i) => {
              enqueued.set(job.id, batch[i]!.payload.kind);
              const parents = (batch[i] as { depends_on?: { item: number }[] }).depends_on;
              if (parents)
                parentsOf.set(
                  job.id,
                  parents.map((p) => data.jobs[p.item]!.id),
                );
            });
            break;
          }
        } catch {
          // replica down: retry with the same keys
        }
        await sleep(100);
      }
      seq += size;
      const behind = (seq / opts.jobs) * spread - (Date.now() - started);
      if (behind > 0) await sleep(behind);
    }
  };
  const producing = produce();

  // --- the chaos driver --------------------------------------------------------------------------
  const admin = async (query: string) => {
    const client = new pg.Client({ connectionString: postgres.url, connectionTimeoutMillis: 3000 });
    client.on('error', () => {});
    try {
      await client.connect();
      await client.query(query);
    } finally {
      await client.end().catch(() => {});
    }
  };
  const events = ['server', 'worker', 'backends', 'server', 'worker'] as const;
  const chaosUntil = Date.now() + opts.durationMs;
  const postgresAt = Date.now() + opts.durationMs * (0.3 + random.next() * 0.3);
  let postgresRestarted = false;
  let step = 0;
  while (Date.now() < chaosUntil) {
    await sleep(1000 + random.int(2500));
    if (!postgresRestarted && Date.now() >= postgresAt) {
      postgresRestarted = true;
      log(`chaos: restarting PostgreSQL`);
      await postgres.stop();
      await sleep(500 + random.int(1500));
      postgres = await startPostgres();
      kills.postgres++;
      continue;
    }
    // The first events go through every kind once; then at random.
    const kind = step < events.length ? events[step]! : random.pick(events);
    step++;
    if (kind === 'server') {
      const i = random.int(replicas);
      const victim = servers[i];
      if (!victim) continue;
      log(`chaos: SIGKILL server replica ${i}`);
      victim.signal('SIGKILL');
      await victim.exited;
      servers[i] = undefined;
      kills.server++;
      await sleep(200 + random.int(1500));
      servers[i] = await ServerProcess.start(env, ports[i]!).catch(() => undefined);
    } else if (kind === 'worker') {
      const victim = random.pick([...workers]);
      if (!victim) continue;
      log('chaos: SIGKILL a worker');
      victim.kill('SIGKILL');
      kills.worker++;
      startWorker();
    } else {
      log("chaos: terminating Baton's database connections");
      await admin(
        `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name LIKE 'baton%'`,
      ).catch(() => {});
      kills.backends++;
    }
  }
  await producing;
  for (let i = 0; i < replicas; i++) servers[i] ??= await ServerProcess.start(env, ports[i]!);

  // --- drain, then check ---------------------------------------------------------------------------
  log('chaos over; draining');
  const reader = new pg.Client({ connectionString: postgres.url });
  await reader.connect();
  const drainDeadline = Date.now() + 120_000;
  let lastReport = 0;
  while (Date.now() < drainDeadline) {
    const live = await reader.query<{ state: string; n: number }>(
      `SELECT state, count(*)::int AS n FROM baton.jobs GROUP BY state`,
    );
    if (live.rows.length === 0) break;
    if (Date.now() - lastReport > 5000) {
      lastReport = Date.now();
      log(`draining: ${live.rows.map((r) => `${r.state} ${r.n}`).join(', ')}; workers ${workers.size}`);
    }
    await sleep(500);
  }
  log('drained');
  for (const w of workers) w.kill('SIGKILL');
  await Promise.all(
    servers.map(async (s) => {
      s?.signal('SIGTERM');
      await s?.exited;
    }),
  );
  const finals = (
    await reader.query<FinalJob>(`
      SELECT id::text, state, attempts, payload->>'kind' AS kind, errors, NULL::float8 AS finished_ms FROM baton.jobs
      UNION ALL SELECT id::text, 'scheduled', attempts, payload->>'kind', errors, NULL FROM baton.scheduled_jobs
      UNION ALL SELECT id::text, 'waiting', attempts, payload->>'kind', errors, NULL FROM baton.waiting_jobs
      UNION ALL SELECT id::text, state, attempts, payload->>'kind', errors,
                       extract(epoch FROM finished_at)::float8 * 1000 FROM baton.job_history`)
  ).rows;
  const rearmed = (
    await reader.query(`
      SELECT count(*)::int AS n FROM baton.job_history h, jsonb_array_elements(h.errors) e
      WHERE e->>'message' = 'lease expired'`)
  ).rows[0].n as number;
  await reader.end();
  await postgres.stop();

  const entries: LedgerEntry[] = [];
  for (const file of ledgers) {
    const text = await fs.readFile(file, 'utf8').catch(() => '');
    for (const line of text.split('\n')) {
      if (!line) continue;
      try {
        entries.push(JSON.parse(line));
      } catch {
        // the line a SIGKILLed worker was writing
      }
    }
  }
  await fs.rm(dir, { recursive: true, force: true });

  const violations = checkLedger(entries, enqueued, finals, parentsOf);
  const starts = entries.filter((e) => e.t === 'start');
  const startedJobs = new Set(starts.map((e) => (e as { job: string }).job));
  const summary: ChaosSummary = {
    seed: opts.seed,
    durationMs: opts.durationMs,
    jobs: enqueued.size,
    workflowChildren: parentsOf.size,
    completed: finals.filter((f) => f.state === 'completed').length,
    dead: finals.filter((f) => f.state === 'dead').length,
    kills,
    rearmed,
    deliveries: starts.length,
    duplicates: starts.length - startedJobs.size,
    lost: violations.missing.length + violations.live.length,
    responses503: entries.filter((e) => e.t === 'http5xx' && e.status === 503).length,
    violations,
    ok: violationCount(violations) === 0,
  };
  return summary;
}

export function formatSummary(s: ChaosSummary): string {
  const v = Object.entries(s.violations)
    .map(([k, list]) => `${k}=${list.length}`)
    .join(' ');
  return [
    `chaos ${s.ok ? 'PASSED' : 'FAILED'} (seed ${s.seed}; replay with --seed ${s.seed})`,
    `  jobs ${s.jobs} (${s.workflowChildren} with parents): completed ${s.completed}, dead ${s.dead} (poison, by design), lost ${s.lost}`,
    `  kills: servers ${s.kills.server}, workers ${s.kills.worker}, backend terminations ${s.kills.backends}, PostgreSQL restarts ${s.kills.postgres}`,
    `  deliveries ${s.deliveries}, duplicates ${s.duplicates} (deliveries beyond the first, allowed by at-least-once), re-arms ${s.rearmed}`,
    `  503 answers seen by workers ${s.responses503}`,
    `  violations: ${v}`,
  ].join('\n');
}
