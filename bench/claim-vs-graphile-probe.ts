import {
  type ClaimedTable,
  drainInterleaved,
  emptyStats,
  printStats,
  probeConnection,
} from './interleaved-claims.js';

/**
 * Issue 17, sixth pass: is a claimed row dearer for PostgreSQL in Baton's table than in
 * graphile-worker's? Claims 100 jobs at a time and deletes them by id, interleaved, on tables holding
 * the same number of ready jobs:
 * - baton: an unpartitioned copy of baton.jobs with its indexes and fillfactor (70), claimed by
 *   Baton's bare claim (state, attempts, a fresh token, lease, claimed_at; FOR UPDATE SKIP LOCKED);
 * - baton-ff100: the same at fillfactor 100;
 * - graphile: graphile-worker 0.16's _private_jobs (its columns, its generated is_available and its
 *   indexes), claimed by its own shape of query (attempts, locked_by, locked_at; FOR UPDATE SKIP
 *   LOCKED on its main index).
 * One connection with the request pool's settings; backend CPU from /proc (bench/interleaved-claims.ts).
 * Uses (and empties) a migrated scratch database:
 *
 *   createdb -h 127.0.0.1 -U postgres probe17 && DATABASE_URL=postgres://postgres@127.0.0.1:5432/probe17 npm run migrate
 *   PROBE_ROUNDS=4 npx tsx bench/claim-vs-graphile-probe.ts
 */
const url = process.env.PROBE_URL ?? 'postgres://postgres@127.0.0.1:5432/probe17';
const JOBS = Number(process.env.PROBE_JOBS ?? 30000);
const ROUNDS = Number(process.env.PROBE_ROUNDS ?? 3);
const probe = await probeConnection(url);
const c = probe.client;

await c.query('CREATE SCHEMA IF NOT EXISTS probe');
await c.query('DROP TABLE IF EXISTS probe.baton, probe.baton100, probe.graphile');
await c.query('CREATE TABLE probe.baton (LIKE baton.jobs INCLUDING ALL) WITH (fillfactor = 70)');
await c.query('CREATE TABLE probe.baton100 (LIKE baton.jobs INCLUDING ALL) WITH (fillfactor = 100)');
await c.query(`CREATE TABLE probe.graphile (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  job_queue_id integer,
  task_id integer NOT NULL,
  payload json NOT NULL DEFAULT '{}'::json,
  priority smallint NOT NULL DEFAULT 0,
  run_at timestamptz NOT NULL DEFAULT now(),
  attempts smallint NOT NULL DEFAULT 0,
  max_attempts smallint NOT NULL DEFAULT 25 CHECK (max_attempts >= 1),
  last_error text,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  key text UNIQUE CHECK (length(key) > 0 AND length(key) <= 512),
  locked_at timestamptz,
  locked_by text,
  revision integer NOT NULL DEFAULT 0,
  flags jsonb,
  is_available boolean NOT NULL GENERATED ALWAYS AS (locked_at IS NULL AND attempts < max_attempts) STORED)`);
await c.query(`CREATE INDEX ON probe.graphile (priority, run_at) INCLUDE (id, task_id, job_queue_id)
  WHERE is_available = true`);
await c.query(`CREATE INDEX ON probe.graphile (priority, run_at) INCLUDE (id, task_id)
  WHERE is_available = true AND job_queue_id IS NULL`);

const batonClaim = (t: string) => `UPDATE ${t} j SET state = 'claimed', attempts = j.attempts + 1,
  lease_token = gen_random_uuid(), lease_ms = 30000, lease_expires_at = clock_timestamp() + interval '30 s',
  claimed_at = clock_timestamp()
  FROM (SELECT slot, id FROM ${t} WHERE queue = $1 AND state = 'ready' ORDER BY priority DESC, run_at, id
        LIMIT 100 FOR UPDATE SKIP LOCKED) p
  WHERE j.id = p.id AND j.slot = p.slot RETURNING j.id, j.lease_token, j.payload::text`;
const byId = (rows: { id: string }[]) => [rows.map((r) => r.id)];
const systems: Record<string, ClaimedTable> = {
  baton: {
    claim: batonClaim('probe.baton'),
    values: ['p'],
    del: 'DELETE FROM probe.baton WHERE id = ANY($1::bigint[])',
    delValues: byId,
  },
  'baton-ff100': {
    claim: batonClaim('probe.baton100'),
    values: ['p'],
    del: 'DELETE FROM probe.baton100 WHERE id = ANY($1::bigint[])',
    delValues: byId,
  },
  graphile: {
    claim: `WITH j AS (
      SELECT id FROM probe.graphile WHERE is_available = true AND run_at <= now() AND task_id = ANY($1::int[])
      ORDER BY priority, run_at LIMIT 100 FOR UPDATE SKIP LOCKED)
      UPDATE probe.graphile g SET attempts = g.attempts + 1, locked_by = $2, locked_at = now()
      FROM j WHERE g.id = j.id RETURNING g.id, g.payload::text`,
    values: [[1], 'worker-1'],
    del: 'DELETE FROM probe.graphile WHERE id = ANY($1::bigint[])',
    delValues: byId,
  },
};
const stats = emptyStats(Object.keys(systems));
for (let round = 0; round < ROUNDS; round++) {
  await c.query('TRUNCATE probe.baton, probe.baton100, probe.graphile');
  for (const t of ['probe.baton', 'probe.baton100'])
    await c.query(
      `INSERT INTO ${t} (slot, id, queue, state, run_at, max_attempts, payload)
       SELECT 0, i, 'p', 'ready', now(), 3, jsonb_build_object('i', i) FROM generate_series(1, $1) i`,
      [JOBS],
    );
  await c.query(
    `INSERT INTO probe.graphile (task_id, payload) SELECT 1, json_build_object('i', i) FROM generate_series(1, $1) i`,
    [JOBS],
  );
  await c.query('VACUUM ANALYZE probe.baton, probe.baton100, probe.graphile');
  await c.query('CHECKPOINT');
  await drainInterleaved(probe, systems, round, stats);
}
printStats(stats);
await c.query('DROP SCHEMA probe CASCADE');
await c.end();
