import pg from 'pg';
import { BatonServer } from './baton-server.js';
import { enqueue, work } from './load/baton-load.js';
import { HttpClient } from './load/http-client.js';

/**
 * Issue 17: PostgreSQL transactions per job in the full cycle, one job per request (4 producers
 * enqueueing one job per request while 16 workers take one at a time), for the two worker loops:
 * claim → ack, and ack-and-claim (`next` on the ack). The producers set the rate, so the queue is
 * mostly empty and workers long-poll: what this counts is how many statements a job costs when work
 * trickles in. Transactions from pg_stat_database (xact_commit + xact_rollback of the database), read
 * after a pause so the backends' counters have been flushed. Runs the built server (npm run build)
 * against a migrated database it empties:
 *
 *   createdb -h 127.0.0.1 -U postgres probe17 && DATABASE_URL=postgres://postgres@127.0.0.1:5432/probe17 npm run migrate
 *   npx tsx bench/xact-per-job.ts [jobs per run, default 3000] [rounds, default 3]
 */
const url = process.env.PROBE_URL ?? 'postgres://postgres@127.0.0.1:5432/probe17';
const jobs = Number(process.argv[2] ?? 3000);
const rounds = Number(process.argv[3] ?? 3);
const admin = new pg.Client({ connectionString: url });
await admin.connect();
const server = new BatonServer({ databaseUrl: url, port: 18_620, env: { BATON_MAINTENANCE: 'false' } });
await server.start();
const client = new HttpClient(server.url);

async function transactions(): Promise<number> {
  await new Promise((r) => setTimeout(r, 1500));
  await admin.query('SELECT pg_stat_clear_snapshot()');
  const { rows } = await admin.query(
    'SELECT xact_commit + xact_rollback AS n FROM pg_stat_database WHERE datname = current_database()',
  );
  return Number(rows[0].n);
}

try {
  for (let round = 0; round < rounds; round++) {
    for (const ackAndClaim of round % 2 === 0 ? [false, true] : [true, false]) {
      await admin.query('TRUNCATE baton.job_history');
      const queue = `xact-${ackAndClaim ? 'ac' : 'ca'}-${round}`;
      const before = await transactions();
      const t0 = performance.now();
      const producing = enqueue(client, queue, jobs, 1, 4);
      const last = await work(client, queue, {
        workers: 16,
        claimSize: 1,
        total: jobs,
        waitMs: 200,
        ackAndClaim,
      });
      await producing;
      const seconds = (last - t0) / 1000;
      // The admin session's own reads (one per transactions() call) are left in: two per run.
      const per = ((await transactions()) - before) / jobs;
      console.log(
        `${ackAndClaim ? 'ack-and-claim' : 'claim → ack  '} round ${round + 1}: ${Math.round(jobs / seconds)} jobs/s, ${per.toFixed(2)} transactions per job`,
      );
    }
  }
} finally {
  await server.stop();
  await admin.end();
}
