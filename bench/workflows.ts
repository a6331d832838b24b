import { parseArgs } from 'node:util';
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import { buildApp } from '../src/app.js';
import { loadConfig } from '../src/config.js';
import { migrateToLatest } from '../src/db/migrate.js';
import { SERVER_URL } from './databases.js';
import { postmasterPid, readPostgresCpu } from './postgres-cpu.js';

/**
 * Workflows (job dependencies, docs/adr/0002-job-dependencies.md): PostgreSQL CPU per job of a graph
 * against plain jobs, end to end (enqueue, claim, ack), on one in-process server over its own database.
 *
 *   npx tsx bench/workflows.ts                      # 100 parents × 100 children, a 1,000-way fan-in
 *   npx tsx bench/workflows.ts --parents 10 --children 10 --fan-in 100 --rounds 1   # a quick check
 *
 * Phases, each run `--rounds` times (alternating), each timed alone:
 *   plain    parents × (children + 1) jobs without dependencies: batches of 100, claim 100 → batch ack
 *   graph    `parents` parents (one batch), then per parent a batch of `children` children naming it;
 *            worked the same way, so children are released by their parents' acks
 *   fan-in   `fan-in` parents (one batch) and one child naming all of them; worked the same way
 * PostgreSQL CPU is the whole server's (bench/postgres-cpu.ts: run it on a quiet PostgreSQL); the ack
 * of a job without dependents against the build before this change is request-cost.ts's job
 * (`--root <old build> --root .`, phases ack-claim and batched).
 */

const { values } = parseArgs({
  options: {
    parents: { type: 'string', default: '100' },
    children: { type: 'string', default: '100' },
    'fan-in': { type: 'string', default: '1000' },
    rounds: { type: 'string', default: '3' },
    database: { type: 'string', default: 'baton_workflows_bench' },
  },
});
const PARENTS = Number(values.parents);
const CHILDREN = Number(values.children);
const FAN_IN = Number(values['fan-in']);
const ROUNDS = Number(values.rounds);
const NAME = values.database!;
if (!/^[a-z_][a-z0-9_]{0,60}$/.test(NAME)) throw new Error('--database must be a lower-case SQL identifier');

const admin = new pg.Client({ connectionString: `${SERVER_URL}/postgres` });
await admin.connect();
await admin.query(`DROP DATABASE IF EXISTS ${NAME} WITH (FORCE)`);
await admin.query(`CREATE DATABASE ${NAME}`);
await admin.end();
const url = `${SERVER_URL}/${NAME}`;
const migrator = new Kysely<any>({
  dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: url }) }),
});
await migrateToLatest(migrator);
await migrator.destroy();

const config = loadConfig({ LOG_LEVEL: 'silent', BATON_MAINTENANCE: 'false', DATABASE_URL: url });
const app = await buildApp({ config, databaseUrl: url });
await app.ready();
const probe = new pg.Client({ connectionString: url });
await probe.connect();
const postmaster = await postmasterPid(probe);

async function call(method: 'POST' | 'GET', path: string, body?: unknown) {
  const res = await app.inject({
    method,
    url: path,
    ...(body === undefined ? {} : { payload: body as object }),
  });
  if (res.statusCode >= 300) throw new Error(`${method} ${path}: ${res.statusCode} ${res.body}`);
  return res.json();
}

async function enqueue(queue: string, jobs: object[]): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < jobs.length; i += 100) {
    const answer = await call('POST', `/v1/queues/${queue}/jobs/batch`, { jobs: jobs.slice(i, i + 100) });
    ids.push(...answer.jobs.map((j: { id: string }) => j.id));
  }
  return ids;
}

/** Claim 100 → batch ack until `total` jobs are done; fails when the queue runs dry before. */
async function work(queue: string, total: number): Promise<void> {
  let done = 0;
  while (done < total) {
    // Long-polling: children are released a moment after their parents' acks (docs/adr/0004).
    const { jobs } = await call('POST', `/v1/queues/${queue}/claim`, { max_jobs: 100, wait_ms: 5000 });
    if (jobs.length === 0) throw new Error(`${queue}: nothing to claim after ${done} of ${total}`);
    await call('POST', '/v1/jobs/ack', {
      acks: jobs.map((j: { id: string; lease_token: string }) => ({
        id: j.id,
        lease_token: j.lease_token,
        result: 1,
      })),
    });
    done += jobs.length;
  }
}

const phases: Record<string, (queue: string) => Promise<number>> = {
  plain: async (queue) => {
    const n = PARENTS * (CHILDREN + 1);
    await enqueue(
      queue,
      Array.from({ length: n }, (_, i) => ({ payload: i })),
    );
    await work(queue, n);
    return n;
  },
  graph: async (queue) => {
    const parents = await enqueue(
      queue,
      Array.from({ length: PARENTS }, (_, i) => ({ payload: i })),
    );
    for (const parent of parents) {
      await enqueue(
        queue,
        Array.from({ length: CHILDREN }, (_, i) => ({ payload: i, depends_on: [parent] })),
      );
    }
    await work(queue, PARENTS * (CHILDREN + 1));
    return PARENTS * (CHILDREN + 1);
  },
  'fan-in': async (queue) => {
    const parents = await enqueue(
      queue,
      Array.from({ length: FAN_IN }, (_, i) => ({ payload: i })),
    );
    await call('POST', `/v1/queues/${queue}/jobs`, { payload: 'sink', depends_on: parents });
    await work(queue, FAN_IN + 1);
    return FAN_IN + 1;
  },
};

const results: Record<string, { cpuMsPer1000: number; wallMsPer1000: number }[]> = {};
for (let round = 0; round < ROUNDS; round++) {
  const order = Object.keys(phases);
  if (round % 2 === 1) order.reverse();
  for (const name of order) {
    const before = readPostgresCpu(postmaster).totalMs;
    const started = performance.now();
    const jobs = await phases[name]!(`${name}-${round}`);
    const wall = performance.now() - started;
    const cpu = readPostgresCpu(postmaster).totalMs - before;
    results[name] = [
      ...(results[name] ?? []),
      { cpuMsPer1000: (cpu / jobs) * 1000, wallMsPer1000: (wall / jobs) * 1000 },
    ];
    console.log(
      `${name.padEnd(7)} round ${round + 1}: ${jobs} jobs, PostgreSQL CPU ${((cpu / jobs) * 1000).toFixed(1)} ms ` +
        `per 1,000 jobs, wall ${((wall / jobs) * 1000).toFixed(0)} ms per 1,000`,
    );
  }
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
console.log('\nmedians (PostgreSQL CPU ms per 1,000 jobs; wall ms per 1,000 jobs):');
for (const [name, rs] of Object.entries(results)) {
  console.log(
    `  ${name.padEnd(7)} ${median(rs.map((r) => r.cpuMsPer1000))
      .toFixed(1)
      .padStart(8)}  ${median(rs.map((r) => r.wallMsPer1000))
      .toFixed(0)
      .padStart(6)}`,
  );
}
await probe.end();
await app.close();
