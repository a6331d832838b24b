import { sql } from 'kysely';
import pino from 'pino';
import { createDatabase } from '../src/db/database.js';
import { ackBriefEach } from '../src/jobs/ack.js';
import { claimStatement } from '../src/jobs/claim/claim.js';
import { insertJobs } from '../src/jobs/enqueue.js';
import { processCpuMs } from './process-usage.js';

/**
 * Issue 17, fourth pass: how much of the claim's PostgreSQL CPU is the statement's own machinery
 * (settings, claimants, dealing, the lease arithmetic) and how much is claiming a row at all (the row
 * lock, the new version, two index entries, WAL). One connection claims 100 at a time until the
 * queue is empty, the variants interleaved claim by claim on the same table, each claim's backend
 * CPU read from /proc; acks go through another connection:
 *
 *   id    Baton's claim statement (claimStatement)
 *   ctid  the same, written back by ctid instead of a second primary-key probe
 *   min   a bare UPDATE ... FROM (SELECT ... FOR UPDATE SKIP LOCKED) with the same lease columns
 *
 *   createdb -h 127.0.0.1 -U postgres probe17 && DATABASE_URL=postgres://postgres@127.0.0.1:5432/probe17 npm run migrate
 *   PROBE_ROUNDS=3 PROBE_JOBS=30000 npx tsx bench/claim-cpu-probe.ts
 */
const url = process.env.PROBE_URL ?? 'postgres://postgres@127.0.0.1:5432/probe17';
const JOBS = Number(process.env.PROBE_JOBS ?? 30000);
const log = pino({ level: 'warn' });
const h = createDatabase(url, { poolSize: 2, statementTimeoutMs: 60000, connectTimeoutMs: 5000 }, log);
const db = h.db;
/** A backend's CPU time so far (bench/process-usage.ts). */
const cpuMs = (pid: number) => processCpuMs(pid) ?? 0;
function ctidSql(text: string): string {
  return text
    .replace(
      'SELECT j.slot, j.id, j.priority, j.run_at FROM baton.jobs j',
      'SELECT j.slot, j.id, j.ctid, j.priority, j.run_at FROM baton.jobs j',
    )
    .replace('SELECT p.id, p.slot, cl.claimant', 'SELECT p.id, p.slot, p.ctid, cl.claimant')
    .replace('SELECT id, slot, row_number()', 'SELECT id, slot, ctid, row_number()')
    .replace('WHERE j.id = a.id AND j.slot = a.slot AND', 'WHERE j.ctid = a.ctid AND j.slot = a.slot AND');
}
const base = claimStatement({ queue: 'p', maxJobs: 100, defaultLeaseMs: 30000 }).compile(db);
const minimal = `UPDATE baton.jobs j SET state = 'claimed', attempts = j.attempts + 1, lease_token = gen_random_uuid(),
  lease_ms = 30000, lease_expires_at = clock_timestamp() + interval '30 s', claimed_at = clock_timestamp()
  FROM (SELECT slot, id FROM baton.jobs WHERE queue = $1 AND state = 'ready' ORDER BY priority DESC, run_at, id LIMIT 100 FOR UPDATE SKIP LOCKED) p
  WHERE j.id = p.id AND j.slot = p.slot RETURNING j.id, j.lease_token, j.payload::text`;
const variants: Record<string, string> = { id: base.sql, ctid: ctidSql(base.sql), min: minimal };
const params: Record<string, unknown[]> = {
  id: base.parameters as unknown[],
  ctid: base.parameters as unknown[],
  min: ['p'],
};
const names = (process.env.PROBE_VARIANTS ?? 'id,ctid,min').split(',');
const stats = Object.fromEntries(names.map((k) => [k, { wall: 0, cpu: 0, n: 0 }]));
for (let round = 0; round < Number(process.env.PROBE_ROUNDS ?? 3); round++) {
  await sql`TRUNCATE baton.jobs, baton.job_history`.execute(db);
  await sql`INSERT INTO baton.queues (name, auto_created) VALUES ('p', false) ON CONFLICT DO NOTHING`.execute(
    db,
  );
  for (let i = 0; i < JOBS; i += 1000) {
    const items = Array.from({ length: 1000 }, (_, k) => ({
      payloadJson: JSON.stringify({ i: i + k }),
      priority: 0,
    }));
    await insertJobs(db, 'p', items, [], 3);
  }
  await sql`VACUUM ANALYZE baton.jobs`.execute(db);
  await sql`CHECKPOINT`.execute(db);
  const client = await h.pool.connect();
  const pid = (await client.query('SELECT pg_backend_pid() AS pid')).rows[0].pid;
  let done = false;
  for (let i = 0; !done; i++) {
    const name = names[(i + round) % names.length]!;
    const c0 = cpuMs(pid);
    const t0 = performance.now();
    const { rows } = await client.query({ name, text: variants[name]!, values: params[name]! });
    stats[name]!.wall += performance.now() - t0;
    stats[name]!.cpu += cpuMs(pid) - c0;
    stats[name]!.n += rows.length;
    if (rows.length === 0) done = true;
    else
      await ackBriefEach(
        db,
        rows.map((j) => ({ id: j.id, leaseToken: j.lease_token })),
      );
  }
  client.release();
}
for (const [k, s] of Object.entries(stats))
  console.log(
    `${k}: jobs ${s.n}, per 1,000 jobs: claim wall ${((s.wall / s.n) * 1000).toFixed(1)} ms, backend cpu ${((s.cpu / s.n) * 1000).toFixed(1)} ms`,
  );
await h.close();
