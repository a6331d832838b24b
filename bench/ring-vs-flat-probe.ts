import { drainInterleaved, emptyStats, printStats, probeConnection } from './interleaved-claims.js';

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
const probe = await probeConnection(url);
const c = probe.client;
await c.query('CREATE SCHEMA IF NOT EXISTS probe');
await c.query('DROP TABLE IF EXISTS probe.flat, probe.bare');
await c.query('CREATE TABLE probe.flat (LIKE baton.jobs INCLUDING ALL) WITH (fillfactor = 70)');
await c.query('CREATE TABLE probe.bare (LIKE baton.jobs INCLUDING ALL) WITH (fillfactor = 70)');
const idx = await c.query(
  `SELECT indexname FROM pg_indexes WHERE schemaname = 'probe' AND tablename = 'bare' AND indexdef LIKE '%claimed%'`,
);
for (const r of idx.rows) await c.query(`DROP INDEX probe.${r.indexname}`);

const tableNames: Record<string, string> = { ring: 'baton.jobs', flat: 'probe.flat', bare: 'probe.bare' };
const claimSql = (
  t: string,
) => `UPDATE ${t} j SET state = 'claimed', attempts = j.attempts + 1, lease_token = gen_random_uuid(),
  lease_ms = 30000, lease_expires_at = clock_timestamp() + interval '30 s', claimed_at = clock_timestamp()
  FROM (SELECT slot, id FROM ${t} WHERE queue = $1 AND state = 'ready' ORDER BY priority DESC, run_at, id LIMIT 100 FOR UPDATE SKIP LOCKED) p
  WHERE j.id = p.id AND j.slot = p.slot RETURNING j.id, j.slot, j.lease_token, j.payload::text`;
const deleteSql = (t: string) =>
  `DELETE FROM ${t} j WHERE j.id = ANY($1::bigint[]) AND j.slot = ANY($2::smallint[]) RETURNING j.id`;
const tables = Object.fromEntries(
  Object.entries(tableNames).map(([name, t]) => [
    name,
    {
      claim: claimSql(t),
      values: ['p'],
      del: deleteSql(t),
      delValues: (rows: { id: string; slot: number }[]) => [
        rows.map((r) => r.id),
        [...new Set(rows.map((r) => r.slot))],
      ],
    },
  ]),
);
const stats = emptyStats(Object.keys(tables));
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
  await drainInterleaved(probe, tables, round, stats);
}
printStats(stats);
await c.end();
