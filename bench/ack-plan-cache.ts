import { sql } from 'kysely';
import pino from 'pino';
import { loadConfig } from '../src/config.js';
import { createDatabase } from '../src/db/database.js';
import { ackBriefEach } from '../src/jobs/ack.js';
import { claimJobs } from '../src/jobs/claim/claim.js';
import { insertJobs } from '../src/jobs/enqueue.js';
import { nackJob } from '../src/jobs/nack.js';
import { processCpuMs } from './process-usage.js';

/**
 * Issue 17, fifth pass: what the plan cache costs the ack. One connection of the request pool claims
 * `size` jobs at a time from 40,000 and acks them (the batch ack's statement), with the session's
 * plan_cache_mode set to `auto` (PostgreSQL's default: it kept choosing custom plans for the ack,
 * planning it on every run) or `generic` (what the request pool now sets), and prints the backend's
 * CPU per 1,000 acked jobs (from /proc) and pg_prepared_statements' plan counts. With a third
 * argument `nack`, each job is nacked as dead instead (claimed one at a time: its lock, then its
 * DELETE and history insert in one transaction). Empties the database:
 *
 *   createdb -h 127.0.0.1 -U postgres probe17 && DATABASE_URL=postgres://postgres@127.0.0.1:5432/probe17 npm run migrate
 *   npx tsx bench/ack-plan-cache.ts auto 1; npx tsx bench/ack-plan-cache.ts generic 1
 *   npx tsx bench/ack-plan-cache.ts auto 1 nack; npx tsx bench/ack-plan-cache.ts generic 1 nack
 */
const url = process.env.PROBE_URL ?? 'postgres://postgres@127.0.0.1:5432/probe17';
const mode = process.argv[2] === 'generic' ? 'force_generic_plan' : 'auto';
const size = Number(process.argv[3] ?? 100);
const nack = process.argv[4] === 'nack';
const JOBS = nack ? 6_000 : 40_000;
const h = createDatabase(
  url,
  { poolSize: 1, statementTimeoutMs: 60_000, connectTimeoutMs: 5_000 },
  pino({ level: 'warn' }),
);
const db = h.db;
await sql`TRUNCATE baton.jobs, baton.job_history`.execute(db);
await sql`INSERT INTO baton.queues (name, auto_created) VALUES ('probe', false) ON CONFLICT DO NOTHING`.execute(
  db,
);
for (let i = 0; i < JOBS; i += 1000) {
  const items = Array.from({ length: 1000 }, (_, k) => ({ payloadJson: `{"i":${i + k}}`, priority: 0 }));
  await insertJobs(db, 'probe', items, [], 3);
}
await sql`VACUUM ANALYZE baton.jobs`.execute(db);
const { rows: session } = await sql<{ pid: number }>`
  SELECT pg_backend_pid() AS pid, set_config('plan_cache_mode', ${mode}, false)`.execute(db);
const pid = session[0]!.pid;
/** The backend's CPU time so far (bench/process-usage.ts). */
const cpuMs = () => processCpuMs(pid) ?? 0;
const config = loadConfig({});
let ackCpu = 0;
let acked = 0;
for (;;) {
  const jobs = await claimJobs(db, { queue: 'probe', maxJobs: size, defaultLeaseMs: 30_000 });
  if (jobs.length === 0) break;
  const before = cpuMs();
  if (nack) {
    for (const j of jobs) {
      await nackJob(db, { id: j.id, leaseToken: j.lease_token, dead: true }, config);
    }
  } else {
    await ackBriefEach(
      db,
      jobs.map((j) => ({ id: j.id, leaseToken: j.lease_token })),
    );
  }
  ackCpu += cpuMs() - before;
  acked += jobs.length;
}
const { rows: plans } = await sql<{ generic: string; custom: string }>`
  SELECT sum(generic_plans) AS generic, sum(custom_plans) AS custom FROM pg_prepared_statements
  WHERE statement LIKE '%DELETE FROM baton.jobs%'`.execute(db);
console.log(
  `plan_cache_mode ${mode}, ${nack ? 'nacks' : 'acks'} of ${size}: ${acked} jobs, backend CPU per 1,000 jobs ` +
    `${((ackCpu / acked) * 1000).toFixed(1)} ms; plans of its DELETE: ${plans[0]!.generic} generic, ${plans[0]!.custom} custom`,
);
await h.close();
