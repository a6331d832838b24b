import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { BatonServer } from './baton-server.js';
import { DATABASES, databaseUrl, recreateDatabase } from './databases.js';
import { HttpClient } from './load/http-client.js';

/**
 * A fan-out against everyone else's acks: one parent with N children (a thousand per request), then
 * honest workers on another queue ack one job per request while the parent is acked; measures the
 * parent's ack, the honest acks' worst and p99 wait while the children are released, and how long the
 * release of all N takes (from the parent's ack being sent until no child waits). For one or more
 * builds (directories holding `dist/`), so an old build and this one run on the same machine.
 *
 *   npm run build && npx tsx bench/fan-out.ts --root /path/to/old-checkout --root . --sizes 20000,150000
 *
 * Uses the bench's Baton database (BENCH_DB_PREFIX renames it, to run beside another bench), a server
 * with the default 30 s statement timeout and no leader (the release does not need one).
 */

const { values } = parseArgs({
  options: {
    root: { type: 'string', multiple: true, default: [] },
    sizes: { type: 'string', default: '20000,150000' },
    workers: { type: 'string', default: '8' },
    port: { type: 'string', default: '18690' },
  },
});
const roots = values.root!.length > 0 ? values.root!.map((r) => resolve(r)) : [resolve('.')];
const sizes = values.sizes!.split(',').map(Number);
const workers = Number(values.workers);
const db = DATABASES.baton;

const quantile = (xs: number[], q: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? 0 : s[Math.min(s.length - 1, Math.floor(q * s.length))]!;
};

async function measure(root: string, size: number) {
  await recreateDatabase(db);
  const server = new BatonServer({
    databaseUrl: databaseUrl(db),
    root,
    port: Number(values.port),
    env: { BATON_MAINTENANCE: 'false' },
  });
  await server.start();
  const client = new HttpClient(server.url, 64);
  const pool = new pg.Pool({ connectionString: databaseUrl(db), max: 2 });
  try {
    const root = await client.post('/v1/queues/b-import/jobs', { payload: 'root' });
    for (let done = 0; done < size; done += 1000) {
      const jobs = Array.from({ length: Math.min(1000, size - done) }, (_, i) => ({
        payload: { row: done + i },
        depends_on: [root.body.id],
      }));
      const r = await client.post('/v1/queues/b-import/jobs/batch', { jobs });
      if (r.status !== 201) throw new Error(`enqueue children: ${r.status}`);
    }
    const claimed = await client.post('/v1/queues/b-import/claim', { max_jobs: 1, lease_ms: 600_000 });

    // Honest workers: a backlog on another queue, each worker claims one job and acks it.
    for (let i = 0; i < 20; i++)
      await client.post('/v1/queues/a-work/jobs/batch', {
        jobs: Array.from({ length: 1000 }, (_, k) => ({ payload: { k } })),
      });
    let stop = false;
    const waits: number[] = [];
    let errors = 0;
    const honest = Promise.all(
      Array.from({ length: workers }, async () => {
        while (!stop) {
          const c = await client.post('/v1/queues/a-work/claim', { max_jobs: 1 });
          const job = c.body?.jobs?.[0];
          if (!job) continue;
          const t = performance.now();
          const a = await client.post(`/v1/jobs/${job.id}/ack`, { lease_token: job.lease_token });
          waits.push(performance.now() - t);
          if (a.status >= 500) errors++;
        }
      }),
    );
    await new Promise((r) => setTimeout(r, 500));
    const before = waits.length;
    const sent = performance.now();
    const ackSent = client.post(`/v1/jobs/${root.body.id}/ack`, {
      lease_token: claimed.body.jobs[0].lease_token,
    });
    // Meanwhile another tenant's small workflow: a parent with one child, acked every 200 ms; how long
    // until its child is ready (read every 5 ms), while the big release runs.
    const smallDelays: number[] = [];
    const stateOf = async (id: string) =>
      ((await (await fetch(`${server.url}/v1/jobs/${id}`)).json()) as { state: string }).state;
    const small = (async () => {
      while (!stop) {
        const graph = await client.post('/v1/queues/a-flow/jobs/batch', {
          jobs: [{ payload: 'parent' }, { payload: 'child', depends_on: [{ item: 0 }] }],
        });
        const child = graph.body.jobs[1].id;
        const job = (await client.post('/v1/queues/a-flow/claim', { max_jobs: 1 })).body.jobs[0];
        const t = performance.now();
        await client.post(`/v1/jobs/${job.id}/ack`, { lease_token: job.lease_token });
        while ((await stateOf(child)) === 'waiting') await new Promise((r) => setTimeout(r, 5));
        smallDelays.push(performance.now() - t);
        const rest = (await client.post('/v1/queues/a-flow/claim', { max_jobs: 1 })).body.jobs;
        for (const j of rest) await client.post(`/v1/jobs/${j.id}/ack`, { lease_token: j.lease_token });
        await new Promise((r) => setTimeout(r, 200));
      }
    })();
    const ack = await ackSent;
    const ackMs = performance.now() - sent;
    // Released: no child of the parent waits any more (read from the database every 20 ms).
    while (true) {
      const { rows } = await pool.query(
        `SELECT count(*)::int AS n FROM baton.waiting_jobs WHERE queue = 'b-import'`,
      );
      if (rows[0].n === 0) break;
      if (performance.now() - sent > 600_000) throw new Error('release did not finish in 10 minutes');
      await new Promise((r) => setTimeout(r, 20));
    }
    const releaseMs = performance.now() - sent;
    stop = true;
    await Promise.all([honest, small]);
    const during = waits.slice(before);
    return {
      ackStatus: ack.status,
      ackMs,
      releaseMs,
      honestAcks: during.length,
      honestP50: quantile(during, 0.5),
      honestP99: quantile(during, 0.99),
      honestMax: Math.max(0, ...during),
      honest5xx: errors,
      smallN: smallDelays.length,
      smallP50: quantile(smallDelays, 0.5),
      smallMax: Math.max(0, ...smallDelays),
    };
  } finally {
    await pool.end();
    await server.stop();
  }
}

const f = (ms: number) => (ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : `${ms.toFixed(1)} ms`);
for (const size of sizes) {
  for (const root of roots) {
    const r = await measure(root, size);
    console.log(
      `${size} children · ${root}\n  parent's ack ${r.ackStatus} in ${f(r.ackMs)}; all released ${f(r.releaseMs)} after it was sent\n` +
        `  honest acks while releasing: ${r.honestAcks}, p50 ${f(r.honestP50)}, p99 ${f(r.honestP99)}, worst ${f(r.honestMax)}, 5xx ${r.honest5xx}\n` +
        `  another parent's child ready after its ack (${r.smallN} graphs): p50 ${f(r.smallP50)}, worst ${f(r.smallMax)}`,
    );
  }
}
