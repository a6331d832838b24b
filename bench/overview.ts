import { parseArgs } from 'node:util';
import { sql } from 'kysely';
import { buildApp } from '../src/app.js';
import { loadConfig } from '../src/config.js';
import { createDatabase } from '../src/db/database.js';
import { migrateToLatest } from '../src/db/migrate.js';
import { noLog } from '../src/logger.js';
import { createHistoryPartitions } from '../src/maintenance/history-partitions.js';
import { recordQueueHistory } from '../src/maintenance/queue-history.js';
import { refreshFinishedStats, refreshLiveStats } from '../src/maintenance/queue-stats.js';
import { DATABASES, databaseUrl, recreateDatabase } from './databases.js';
import { fmt, median } from './stats.js';

/**
 * The dashboard's first page at scale: `npx tsx bench/overview.ts [--queues 1000] [--dead 100000]
 * [--failing 10000] [--requests 50]`. Fills the bench's Baton database (BENCH_DB_PREFIX applies) with `queues` queues, `dead` dead jobs spread over
 * them (in history, as the leader's prune keeps them), a ready job in each and an hour of
 * per-minute samples for every queue; the leader's counts run once. Then times the requests the
 * page makes, in process (app.inject, so HTTP parsing is left out and the figure is the server's
 * and PostgreSQL's): GET /v1/overview, GET /v1/queues for the first page of 50, and one queue's hour (each row's sparklines). Target: the
 * overview answers in under a second. Then the Jobs page's lists across queues (GET /v1/jobs), with
 * `failing` jobs waiting for a retry (and as many that never failed) and an idempotency key per dead
 * job: the last hour's dead and failing jobs, filtered by error text (1 in 100 match; and a text
 * none has, which walks every dead job of the hour), one queue's, a second page, and a key.
 */
const { values } = parseArgs({
  options: {
    queues: { type: 'string', default: '1000' },
    dead: { type: 'string', default: '100000' },
    requests: { type: 'string', default: '50' },
    failing: { type: 'string', default: '10000' },
  },
});
const FAILING = Number(values.failing);
const QUEUES = Number(values.queues);
const DEAD = Number(values.dead);
const REQUESTS = Number(values.requests);

await recreateDatabase(DATABASES.baton);
const url = databaseUrl(DATABASES.baton);
const config = loadConfig({ LOG_LEVEL: 'silent', BATON_MAINTENANCE: 'false' });
const handle = createDatabase(url, config, noLog, 'maintenance');
await migrateToLatest(handle.db);
const t0 = performance.now();
const db = handle.db;
await sql`
  INSERT INTO baton.queues (name, auto_created)
  SELECT 'queue-' || lpad(g::text, 5, '0'), true FROM generate_series(1, ${QUEUES}::integer) g`.execute(db);
await sql`
  INSERT INTO baton.job_history (id, queue, state, priority, run_at, attempts, max_attempts, created_at,
                                 claimed_at, finished_at, dead_reason, payload, last_error)
  SELECT nextval('baton.jobs_id_seq'), 'queue-' || lpad((1 + g % ${QUEUES}::integer)::text, 5, '0'), 'dead', 0,
         now() - interval '2 hours', 5, 5, now() - interval '2 hours', now() - interval '1 hour',
         now() - (g % 3600) * interval '1 second', 'attempts_exhausted', jsonb_build_object('i', g),
         jsonb_build_object('message', CASE WHEN g % 100 = 0 THEN 'SMTP timeout' ELSE 'failed' END, 'attempt', 5,
                            'at', to_char((now() - (g % 3600) * interval '1 second') AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))
  FROM generate_series(1, ${DEAD}::integer) g`.execute(db);
// Jobs waiting for a retry (a failing job each), failed within the hour, and as many that never failed.
await sql`
  INSERT INTO baton.scheduled_jobs (id, queue, priority, run_at, attempts, max_attempts, created_at, payload, last_error, errors)
  SELECT nextval('baton.jobs_id_seq'), 'queue-' || lpad((1 + g % ${QUEUES}::integer)::text, 5, '0'), 0,
         now() + interval '10 minutes', CASE WHEN g % 2 = 0 THEN 1 ELSE 0 END, 5, now(), '{}',
         CASE WHEN g % 2 = 0 THEN jsonb_build_object('message', 'failed', 'attempt', 1, 'at',
           to_char((now() - (g % 3600) * interval '1 second') AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')) END,
         '[]'
  FROM generate_series(1, ${FAILING * 2}::integer) g`.execute(db);
// A failing job's error entries: its last error is its one failed attempt (counted by the leader's samples).
await sql`UPDATE baton.scheduled_jobs SET errors = jsonb_build_array(last_error) WHERE last_error IS NOT NULL`.execute(
  db,
);
await sql`
  INSERT INTO baton.idempotency_keys (queue, key, job_id, expires_at)
  SELECT 'queue-' || lpad((1 + g % ${QUEUES}::integer)::text, 5, '0'), 'order-' || g, g, now() + interval '1 day'
  FROM generate_series(1, ${DEAD}::integer) g`.execute(db);
await createHistoryPartitions(db, { lockTimeoutMs: 5000, defaults: config });
await sql`
  INSERT INTO baton.jobs (slot, id, queue, state, priority, run_at, max_attempts, payload)
  SELECT baton.job_slot(i), i, name, 'ready', 0, now() - interval '30 seconds', 5, '{}'
  FROM (SELECT nextval('baton.jobs_id_seq') AS i, name FROM baton.queues) q`.execute(db);
await sql`ANALYZE`.execute(db);
// The leader's counts over all of it: live ones every tick (with the failing jobs), the sample once a
// minute (with the attempts failed in its window, read from those jobs' error entries).
let started = performance.now();
await refreshLiveStats(db, { limit: QUEUES + 1 });
const liveMs = performance.now() - started;
await refreshFinishedStats(db, { olderThanMs: 0 });
started = performance.now();
await recordQueueHistory(db, QUEUES + 1);
const sampleMs = performance.now() - started;
console.log(
  `the leader: live counts of ${QUEUES} queues ${fmt(liveMs)} ms (every tick), their minute samples ${fmt(sampleMs)} ms`,
);
// An hour of samples for every queue (the leader writes one a minute), as after an hour's work.
await sql`
  INSERT INTO baton.queue_history (queue, minute, at, since, scheduled, ready, claimed, oldest_ready_age_ms,
                                   enqueued, completed, dead, cancelled)
  SELECT q.name, date_trunc('minute', now()) - m * interval '1 minute', now() - m * interval '1 minute',
         now() - (m + 1) * interval '1 minute', 0, 1, 0, 1000, 30, 28, 2, 0
  FROM baton.queues q, generate_series(1, 59) m
  ON CONFLICT DO NOTHING`.execute(db);
await sql`VACUUM ANALYZE`.execute(db);
console.log(
  `filled in ${fmt((performance.now() - t0) / 1000)} s: ${QUEUES} queues, ${DEAD} dead jobs, an hour of samples`,
);

const app = await buildApp({ config, databaseUrl: url });
await app.ready();
async function time(path: string): Promise<number[]> {
  const ms: number[] = [];
  for (let i = 0; i < REQUESTS; i++) {
    const start = performance.now();
    const res = await app.inject({ method: 'GET', url: path });
    ms.push(performance.now() - start);
    if (res.statusCode !== 200) throw new Error(`${path}: ${res.statusCode} ${res.body.slice(0, 200)}`);
  }
  return ms.sort((a, b) => a - b);
}
const hour = encodeURIComponent(new Date(Date.now() - 3_600_000).toISOString());
const firstDead = (await app.inject({ method: 'GET', url: `/v1/jobs?state=dead&since=${hour}` })).json();
for (const path of [
  '/v1/overview',
  '/v1/queues?limit=50',
  '/v1/queues/queue-00001/history',
  `/v1/jobs?state=dead&since=${hour}`,
  `/v1/jobs?state=dead&since=${hour}&cursor=${firstDead.next_cursor}`,
  `/v1/jobs?state=dead&since=${hour}&error=timeout`,
  `/v1/jobs?state=dead&since=${hour}&error=no-such-text`,
  `/v1/jobs?state=dead&since=${hour}&queue=queue-00001`,
  `/v1/jobs?state=failing&since=${hour}`,
  '/v1/jobs?idempotency_key=order-500',
  // What "Select every job of this list" asks: the count (up to 10,000) beside one row.
  `/v1/jobs?state=dead&since=${hour}&limit=1&count=true`,
  `/v1/jobs?state=dead&since=${hour}&limit=1&count=true&error=timeout`,
]) {
  const first = await time(path);
  const ms = first;
  console.log(
    `${decodeURIComponent(path)
      .replace(/since=[^&]+/, 'since=<an hour ago>')
      .replace(
        /cursor=.*/,
        'cursor=<page 2>',
      )}: p50 ${fmt(median(ms))} ms, p99 ${fmt(ms[Math.min(ms.length - 1, Math.floor(ms.length * 0.99))]!)} ms, max ${fmt(ms.at(-1)!)} ms over ${REQUESTS} requests`,
  );
}
// Last, as it changes what the reads above see: every dead job whose error says timeout, redriven
// by one bulk action on the list (a page of 1,000 at a time).
{
  const start = performance.now();
  const res = await app.inject({
    method: 'POST',
    url: '/v1/jobs/bulk',
    payload: { action: 'redrive', match: { state: 'dead', error: 'timeout' } },
  });
  const answer = res.json();
  console.log(
    `POST /v1/jobs/bulk redrive match error=timeout: ${answer.done} redriven, ${answer.failed} not, more ${answer.more}, in ${fmt(performance.now() - start)} ms`,
  );
}
const overview = (await app.inject({ method: 'GET', url: '/v1/overview' })).json();
console.log(
  `overview: ${overview.totals.queues} queues, ${overview.totals.dead} dead, ${overview.minutes.length} minutes, ${overview.attention.length} queues needing attention`,
);
await app.close();
await handle.close();
process.exit(0);
