import pg from 'pg';
import { processCpuMs } from './process-usage.js';

/**
 * Issue 17, fifth pass: what the ring itself costs PostgreSQL per job. Claims 100 jobs at a time (a
 * bare UPDATE ... FROM (SELECT ... FOR UPDATE SKIP LOCKED)) and deletes them by id, interleaved on
 * three tables holding the same rows: the ring (baton.jobs, eight partitions), an unpartitioned copy
 * with the same indexes (probe.flat), and that copy without jobs_claimed_idx (probe.bare). One
 * connection with the request pool's planner settings; backend CPU from /proc. Empties the database:
 *
 *   createdb -h 127.0.0.1 -U postgres probe17 && DATABASE_URL=postgres://postgres@127.0.0.1:5432/probe17 npm run migrate
 *   npx tsx bench/ring-vs-flat-probe.ts
 */
const url = process.env.PROBE_URL ?? 'postgres://postgres@127.0.0.1:5432/probe17';
const JOBS = Number(process.env.PROBE_JOBS ?? 30000);
const ROUNDS = Number(process.env.PROBE_ROUNDS ?? 3);
/** A backend's CPU time so far (bench/process-usage.ts). */
const cpuMs = (pid: number) => processCpuMs(pid) ?? 0;
const c = new pg.Client({
  connectionString: url,
  options: '-c enable_seqscan=off -c enable_hashjoin=off -c enable_mergejoin=off -c jit=off',
});
await c.connect();
const pid = (await c.query('SELECT pg_backend_pid() AS pid')).rows[0].pid;
await c.query('CREATE SCHEMA IF NOT EXISTS probe');
await c.query('DROP TABLE IF EXISTS probe.flat, probe.bare');
await c.query('CREATE TABLE probe.flat (LIKE baton.jobs INCLUDING ALL) WITH (fillfactor = 70)');
await c.query('CREATE TABLE probe.bare (LIKE baton.jobs INCLUDING ALL) WITH (fillfactor = 70)');
const idx = await c.query(
  `SELECT indexname FROM pg_indexes WHERE schemaname = 'probe' AND tablename = 'bare' AND indexdef LIKE '%claimed%'`,
);
for (const r of idx.rows) await c.query(`DROP INDEX probe.${r.indexname}`);

const tables: Record<string, string> = { ring: 'baton.jobs', flat: 'probe.flat', bare: 'probe.bare' };
const claimSql = (
  t: string,
) => `UPDATE ${t} j SET state = 'claimed', attempts = j.attempts + 1, lease_token = gen_random_uuid(),
  lease_ms = 30000, lease_expires_at = clock_timestamp() + interval '30 s', claimed_at = clock_timestamp()
  FROM (SELECT slot, id FROM ${t} WHERE queue = $1 AND state = 'ready' ORDER BY priority DESC, run_at, id LIMIT 100 FOR UPDATE SKIP LOCKED) p
  WHERE j.id = p.id AND j.slot = p.slot RETURNING j.id, j.slot, j.lease_token, j.payload::text`;
const deleteSql = (t: string) =>
  `DELETE FROM ${t} j WHERE j.id = ANY($1::bigint[]) AND j.slot = ANY($2::smallint[]) RETURNING j.id`;
const names = Object.keys(tables);
const stats = Object.fromEntries(names.map((k) => [k, { claim: 0, del: 0, n: 0 }]));
for (let round = 0; round < ROUNDS; round++) {
  await c.query('TRUNCATE baton.jobs, baton.job_history, probe.flat, probe.bare');
  await c.query(`INSERT INTO baton.queues (name, auto_created) VALUES ('p', false) ON CONFLICT DO NOTHING`);
  await c.query(
    `INSERT INTO baton.jobs (slot, id, queue, state, run_at, max_attempts, payload)
     SELECT baton.job_slot(i), i, 'p', 'ready', now(), 3, jsonb_build_object('i', i) FROM generate_series(1, $1) i`,
    [JOBS],
  );
  await c.query('INSERT INTO probe.flat SELECT * FROM baton.jobs');
  await c.query('INSERT INTO probe.bare SELECT * FROM baton.jobs');
  await c.query('VACUUM ANALYZE baton.jobs, probe.flat, probe.bare');
  await c.query('CHECKPOINT');
  const left = new Set(names);
  for (let i = 0; left.size > 0; i++) {
    const name = names[(i + round) % names.length]!;
    if (!left.has(name)) continue;
    const t = tables[name]!;
    let c0 = cpuMs(pid);
    const { rows } = await c.query({ name: `claim-${name}`, text: claimSql(t), values: ['p'] });
    stats[name]!.claim += cpuMs(pid) - c0;
    stats[name]!.n += rows.length;
    if (rows.length === 0) {
      left.delete(name);
      continue;
    }
    c0 = cpuMs(pid);
    await c.query({
      name: `del-${name}`,
      text: deleteSql(t),
      values: [rows.map((r) => r.id), [...new Set(rows.map((r) => r.slot))]],
    });
    stats[name]!.del += cpuMs(pid) - c0;
  }
}
for (const [k, s] of Object.entries(stats))
  console.log(
    `${k}: jobs ${s.n}, backend CPU per 1,000 jobs: claim ${((s.claim / s.n) * 1000).toFixed(1)} ms, delete ${((s.del / s.n) * 1000).toFixed(1)} ms`,
  );
await c.end();
