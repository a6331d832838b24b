import { DummyDriver, Kysely, PostgresAdapter, PostgresIntrospector, PostgresQueryCompiler } from 'kysely';
import pg from 'pg';
import { Histogram } from 'prom-client';
import type { Db } from '../src/db/database.js';
import { StatementNames } from '../src/db/prepared-statements.js';
import { isoTime } from '../src/http/iso-time.js';
import { claimJobs, claimStatement } from '../src/jobs/claim/claim.js';
import { KeyedHistogram } from '../src/metrics/keyed-histogram.js';

/**
 * Issue 17, second pass: the per-request pieces each change of the pass replaced, timed in process
 * (µs per call, best of five runs), old way against new way. End-to-end figures come from
 * bench/request-cost.ts; on a shared two-core machine its per-build differences of a few per cent
 * drown in the load of others, while these do not.
 *
 *   npx tsx bench/hot-path-parts.ts
 */

function time(run: (i: number) => unknown, n: number): number {
  for (let i = 0; i < n / 5; i++) run(i);
  let best = Number.POSITIVE_INFINITY;
  for (let round = 0; round < 5; round++) {
    const t0 = performance.now();
    for (let i = 0; i < n; i++) run(i);
    best = Math.min(best, ((performance.now() - t0) / n) * 1000);
  }
  return best;
}

async function timeAsync(run: (i: number) => Promise<unknown>, n: number): Promise<number> {
  for (let i = 0; i < n / 5; i++) await run(i);
  let best = Number.POSITIVE_INFINITY;
  for (let round = 0; round < 5; round++) {
    const t0 = performance.now();
    for (let i = 0; i < n; i++) await run(i);
    best = Math.min(best, ((performance.now() - t0) / n) * 1000);
  }
  return best;
}

const rows: [string, number, number][] = [];
const report = (what: string, before: number, after: number) => rows.push([what, before, after]);

// 1. The claim statement: built and compiled on every call, its fresh text looked up by the
// named-statement cache (prepared-statements.ts) — against compiled once per shape.
const names = new StatementNames();
class NamingDriver extends DummyDriver {
  override async acquireConnection() {
    return {
      executeQuery: async (q: { sql: string }) => {
        names.nameFor(q.sql);
        return { rows: [] };
      },
      streamQuery: async function* () {},
    };
  }
}
const db = new Kysely<any>({
  dialect: {
    createAdapter: () => new PostgresAdapter(),
    createDriver: () => new NamingDriver(),
    createIntrospector: (d) => new PostgresIntrospector(d),
    createQueryCompiler: () => new PostgresQueryCompiler(),
  },
}) as Db;
const claim = { queue: 'q', maxJobs: 1, defaultLeaseMs: 30_000 };
report(
  'claim statement: build + compile + name lookup, then a (dummy) execute',
  await timeAsync(() => claimStatement(claim).execute(db), 20_000),
  await timeAsync(() => claimJobs(db, claim), 20_000),
);

// 2. node-postgres: a named query as a config object (copied through Object.defineProperties) or
// built from its text.
const text = claimStatement(claim).compile(db).sql;
const done = () => {};
report(
  'pg Query for a named statement',
  time((i) => new pg.Query({ name: 'baton_1', text, values: [i] } as never), 200_000),
  time((i) => {
    const q = new pg.Query(text, [i], done);
    (q as { name?: string }).name = 'baton_1';
  }, 200_000),
);

// 3. Four times of a claimed job written as ISO 8601.
const now = Date.now();
const dates = [0, 1, 2, 3].map((k) => new Date(now + k * 1234));
let sink = 0;
report(
  'four timestamps as ISO 8601 text',
  time(() => {
    for (const d of dates) sink += d.toISOString().length;
  }, 200_000),
  time(() => {
    for (const d of dates) sink += isoTime(d).length;
  }, 200_000),
);

// 4. One histogram observation (request duration: three labels).
const plain = new Histogram({
  name: 'a',
  help: 'a',
  labelNames: ['method', 'route', 'status_class'],
  registers: [],
});
const keyed = new KeyedHistogram({
  name: 'b',
  help: 'b',
  labelNames: ['method', 'route', 'status_class'],
  registers: [],
});
const labels = { method: 'POST', route: '/v1/jobs/:id/ack', status_class: '2xx' };
report(
  'one request-duration observation',
  time((i) => plain.observe(labels, (i % 100) / 1000), 500_000),
  time((i) => keyed.observeKeyed(`POST 2xx /v1/jobs/:id/ack`, labels, (i % 100) / 1000), 500_000),
);

console.log('| per call | before (µs) | after (µs) |\n| --- | --- | --- |');
for (const [what, before, after] of rows)
  console.log(`| ${what} | ${before.toFixed(2)} | ${after.toFixed(2)} |`);
if (sink < 0) console.log(sink);
