import { Kysely, PostgresDialect } from 'kysely';
import { createDatabase } from '../src/db/database.js';
import { migrateToLatest } from '../src/db/migrate.js';
import type { Database } from '../src/db/schema.js';
import { ackBriefEach } from '../src/jobs/ack.js';
import { claimJobs } from '../src/jobs/claim/claim.js';
import { noLog } from '../src/logger.js';
import { DATABASES, databaseUrl, recreateDatabase } from './databases.js';

/**
 * Where a claim of 100 on a queue with every limit set (none reached) spends its time, against the
 * same claim on a queue without limits: each statement's median ms per claim as the client sees it
 * (round trip included), in process, on the bench's Baton database (dropped and re-created) (docs/benchmarks.md, issue 16,
 * "Batched processing with limits set but never reached"). Each queue holds 60,000 ready jobs and
 * 800 claimed ones (8 workers × 100 in flight), and every claim is acked at once (untimed).
 *
 *   npx tsx bench/flow-claim-breakdown.ts
 */
const NAME = DATABASES.baton;
await recreateDatabase(NAME);
const url = databaseUrl(NAME);
const handle = createDatabase(
  url,
  { poolSize: 1, statementTimeoutMs: 60_000, connectTimeoutMs: 5_000 },
  noLog,
);
await migrateToLatest(handle.db);
const admin = handle.pool;
await admin.query(
  `INSERT INTO baton.queues (name, auto_created) VALUES ('limited', false), ('unlimited', false)`,
);
await admin.query(`UPDATE baton.queues SET concurrency_limit = 100000, rate_limit = 1000000, rate_period_ms = 1000,
  group_concurrency_limit = 100000, group_rate_limit = 1000000, group_rate_period_ms = 1000 WHERE name = 'limited'`);
for (const q of ['limited', 'unlimited']) {
  await admin.query(
    `INSERT INTO baton.jobs (slot, id, queue, state, run_at, max_attempts, payload)
     SELECT baton.job_slot(id), id, $1, 'ready', now(), 5, jsonb_build_object('i', g)
     FROM (SELECT nextval('baton.jobs_id_seq') AS id, g FROM generate_series(1, 60000) g) s`,
    [q],
  );
}
await admin.query('VACUUM ANALYZE baton.jobs');
for (const q of ['limited', 'unlimited'])
  await claimJobs(handle.db, { queue: q, maxJobs: 800, leaseMs: 600_000, defaultLeaseMs: 30_000 });

const kind = (text: string) => text.trim().split(/\s+/).slice(0, 3).join(' ');
let perClaim: Record<string, number> = {};
const timed = new Kysely<Database>({
  dialect: new PostgresDialect({ pool: handle.pool }),
  log: (e) => {
    perClaim[kind(e.query.sql)] = (perClaim[kind(e.query.sql)] ?? 0) + e.queryDurationMillis;
  },
});
const samples: Record<string, { total: number; statements: Record<string, number> }[]> = {
  limited: [],
  unlimited: [],
};
for (let round = 0; round < 6; round++) {
  for (const q of round % 2 ? ['limited', 'unlimited'] : ['unlimited', 'limited']) {
    for (let i = 0; i < 40; i++) {
      perClaim = {};
      const t = performance.now();
      const jobs = await claimJobs(timed, {
        queue: q,
        maxJobs: 100,
        leaseMs: 60_000,
        defaultLeaseMs: 30_000,
      });
      samples[q]!.push({ total: performance.now() - t, statements: perClaim });
      await ackBriefEach(
        handle.db,
        jobs.map((j) => ({ id: String(j.id), leaseToken: j.lease_token })),
      );
    }
  }
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
for (const [q, claims] of Object.entries(samples)) {
  console.log(`${q}: claim of 100, median ${median(claims.map((c) => c.total)).toFixed(2)} ms`);
  const kinds = [...new Set(claims.flatMap((c) => Object.keys(c.statements)))];
  for (const k of kinds)
    console.log(`  ${median(claims.map((c) => c.statements[k] ?? 0)).toFixed(3)} ms  ${k}`);
}
await handle.close();
