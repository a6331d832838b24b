import { parseArgs } from 'node:util';
import pino from 'pino';
import { createDatabase } from '../src/db/database.js';
import { recordStatements } from '../src/db/statement-recorder.js';
import { renewLeases } from '../src/jobs/renew.js';
import { processCpuMs } from './process-usage.js';

/**
 * Issue 17: what one batch renew costs PostgreSQL while many other jobs are claimed. Fills a scratch
 * database's ring with `--claimed` claimed jobs, then EXPLAIN ANALYZEs (rolled back) the renewal of
 * `--renewals` of them as the server sends it, in a session with the request pool's planner settings,
 * and prints the backend's CPU (from /proc), the execution time and the rows read only to be thrown
 * away. The database must be migrated and is emptied:
 *
 *   createdb -h 127.0.0.1 -U postgres probe17 && DATABASE_URL=postgres://postgres@127.0.0.1:5432/probe17 npm run migrate
 *   npx tsx bench/batch-renew-plan.ts --claimed 30000 --renewals 800
 */
const { values } = parseArgs({
  options: {
    url: { type: 'string', default: 'postgres://postgres@127.0.0.1:5432/probe17' },
    claimed: { type: 'string', default: '30000' },
    renewals: { type: 'string', default: '800' },
  },
});
const h = createDatabase(
  values.url!,
  { poolSize: 1, statementTimeoutMs: 60_000, connectTimeoutMs: 5_000 },
  pino({ level: 'warn' }),
);
const c = await h.pool.connect();
const pid = (await c.query('SELECT pg_backend_pid() AS pid')).rows[0].pid;
/** The backend's CPU time so far (bench/process-usage.ts). */
const cpuMs = () => processCpuMs(pid) ?? 0;
await c.query('TRUNCATE baton.jobs, baton.job_history');
await c.query(
  `INSERT INTO baton.jobs (slot, id, queue, state, run_at, max_attempts, payload, attempts,
                           lease_token, lease_ms, lease_expires_at, claimed_at)
   SELECT baton.job_slot(i), i, 'probe', 'claimed', now(), 3, jsonb_build_object('i', i), 1,
          gen_random_uuid(), 30000, now() + interval '30 s', now()
   FROM generate_series(1, $1::integer) i`,
  [Number(values.claimed)],
);
await c.query('ANALYZE baton.jobs');
const { rows } = await c.query(
  'SELECT id::text AS id, lease_token::text AS token FROM baton.jobs ORDER BY random() LIMIT $1',
  [Number(values.renewals)],
);
const [renew] = await recordStatements((db) =>
  renewLeases(
    db,
    rows.map((r) => ({ id: r.id, leaseToken: r.token })),
  ),
);
await c.query('BEGIN');
const before = cpuMs();
const { rows: plan } = await c.query(
  `EXPLAIN (ANALYZE, FORMAT JSON) ${renew!.sql}`,
  renew!.parameters as unknown[],
);
const cpu = cpuMs() - before;
await c.query('ROLLBACK');
const text = JSON.stringify(plan[0]['QUERY PLAN']);
const removed = [...text.matchAll(/"Rows Removed by (?:Join )?Filter":(\d+)/g)].reduce(
  (n, m) => n + Number(m[1]),
  0,
);
console.log(
  `${values.renewals} renewals among ${values.claimed} claimed jobs: backend CPU ${cpu} ms, ` +
    `execution ${plan[0]['QUERY PLAN'][0]['Execution Time'].toFixed(1)} ms, rows thrown away ${removed}`,
);
c.release();
await h.close();
