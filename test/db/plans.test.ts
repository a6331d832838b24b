import { type CompiledQuery, sql } from 'kysely';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDatabase, type Db } from '../../src/db/database.js';
import { recordStatements } from '../../src/db/statement-recorder.js';
import { ackBriefEach, ackEach } from '../../src/jobs/ack.js';
import { ackAndClaimEach } from '../../src/jobs/claim/ack-and-claim.js';
import { claimJobs, claimStatement } from '../../src/jobs/claim/claim.js';
import { releaseClaims } from '../../src/jobs/claim/release.js';
import { nackJob } from '../../src/jobs/nack.js';
import { getJobs, getScopedJobs, queuesOfJobs } from '../../src/jobs/read.js';
import { renewLeases } from '../../src/jobs/renew.js';
import { noLog } from '../../src/logger.js';
import { useTestApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { api } from '../support/http.js';

/**
 * The ring's partitions are often empty when a session plans a statement (right after a
 * truncation), and a generic plan made then is kept after they fill. The request pool's planner
 * settings (PoolRole in src/db/database.ts) must make every hot statement's generic plan probe the
 * ring by index whatever the partitions held at planning time: no sequential scan of a ring
 * partition, no hash or merge join. Checked here with the server's own statements, taken from its
 * query modules, planned in a session of the server's request pool.
 */
const database = useTestDatabase();
const app = useTestApp(database);

const TOKEN = '3f0e9a52-6a43-4a0c-9d4e-52d1b6e0c001';

async function hotStatements(): Promise<Record<string, CompiledQuery>> {
  const first = async (run: Parameters<typeof recordStatements>[0]) => (await recordStatements(run))[0]!;
  const items = [
    { id: '1', leaseToken: TOKEN },
    { id: '5000', leaseToken: TOKEN },
  ];
  return {
    claim: claimStatement({ queue: 'plans', maxJobs: 10, defaultLeaseMs: 30_000 }).compile(database.db),
    'grouped claim': claimStatement(
      { queue: 'plans', maxJobs: 10, defaultLeaseMs: 30_000 },
      'grouped',
    ).compile(database.db),
    ack: await first((db) => ackEach(db, items)),
    'batch ack': await first((db) => ackBriefEach(db, items)),
    'ack and claim': await first((db) =>
      ackAndClaimEach(
        db,
        30_000,
        items.map((item) => ({ ...item, next: { maxJobs: 1 } })),
      ),
    ),
    renew: await first((db) => renewLeases(db, items)),
    'renew with progress': await first((db) =>
      renewLeases(
        db,
        items.map((item) => ({ ...item, progressJson: '{"done":1}' })),
      ),
    ),
    'nack (lock)': await first((db) =>
      nackJob(db, { id: '1', leaseToken: TOKEN }, app.config).catch(() => undefined),
    ),
    release: await first((db) => releaseClaims(db, [{ id: '1', lease_token: TOKEN }])),
    'get by id': await first((db) => getJobs(db, ['1', '5000'])),
    "a batch's queues, in its slot": await first((db) => queuesOfJobs(db, ['4097', '4100'])),
    "a batch's queues, in every slot": await first((db) => queuesOfJobs(db, ['1', '5000'])),
    'get by id, scoped (an await of a queue-limited key)': await first((db) =>
      getScopedJobs(db, [{ id: '1', queue: 'plans' }, { id: '5000' }]),
    ),
  };
}

const quote = (text: string) => `'${text.replaceAll("'", "''")}'`;
/** A parameter as SQL text for EXECUTE: arrays as array literals (a null element as NULL). */
const literal = (value: unknown): string => {
  if (value === null || value === undefined) return 'NULL';
  if (Array.isArray(value))
    return quote(
      `{${value.map((v) => (v === null ? 'NULL' : `"${String(v).replaceAll('"', '\\"')}"`)).join(',')}}`,
    );
  return quote(String(value));
};

/** The generic plan of a statement, in one session of the server's request pool. */
async function genericPlan(client: pg.PoolClient, name: string, compiled: CompiledQuery): Promise<string> {
  const statement = `plan_${name.replace(/\W+/g, '_')}`;
  await client.query(`DEALLOCATE ALL`);
  await client.query(`PREPARE ${statement} AS ${compiled.sql}`);
  const args = compiled.parameters.map(literal).join(', ');
  const { rows } = await client.query(`EXPLAIN (FORMAT JSON) EXECUTE ${statement}${args ? `(${args})` : ''}`);
  return JSON.stringify(rows[0]['QUERY PLAN']);
}

describe('generic plans of the hot statements on the ring', () => {
  let client: pg.PoolClient;
  let statements: Record<string, CompiledQuery>;
  beforeAll(async () => {
    statements = await hotStatements();
    client = await app.dbPool.connect();
    await client.query(`SET plan_cache_mode = force_generic_plan`);
  });
  afterAll(() => client?.release());

  const check = async (when: string) => {
    for (const [name, compiled] of Object.entries(statements)) {
      const plan = await genericPlan(client, name, compiled);
      expect(plan, `${name} (${when}) scans a ring partition`).not.toMatch(
        /"Node Type":"Seq Scan"[^}]*"Relation Name":"jobs_\d"/,
      );
      expect(plan, `${name} (${when})`).not.toMatch(/"Node Type":"(Hash|Merge) Join"/);
    }
  };

  it('probe the ring by index while every partition is empty', async () => {
    await check('empty ring');
  });

  it('and still do once the partitions hold thousands of jobs and have been analysed', async () => {
    for (let b = 0; b < 10; b++) {
      await api(app).enqueueBatch(
        'plans',
        Array.from({ length: 1000 }, (_, i) => ({ payload: i })),
      );
    }
    await api(app).claim('plans', { max_jobs: 1000 });
    await client.query('ANALYZE baton.jobs');
    await check('full ring');
  });
});

describe("the claim's write-back", () => {
  it('probes the primary key of the partition its rows are in, not every partition of the ring', async () => {
    await api(app).enqueueBatch(
      'plans-prune',
      Array.from({ length: 20 }, (_, i) => ({ payload: i })),
    );
    const compiled = claimStatement({ queue: 'plans-prune', maxJobs: 10, defaultLeaseMs: 30_000 }).compile(
      database.db,
    );
    const session = await app.dbPool.connect();
    try {
      await session.query(`SET plan_cache_mode = force_generic_plan`);
      await session.query('BEGIN');
      try {
        await session.query(`PREPARE prune_claim AS ${compiled.sql}`);
        const args = compiled.parameters.map(literal).join(', ');
        const { rows } = await session.query(`EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE prune_claim(${args})`);
        const plan = JSON.stringify(rows[0]['QUERY PLAN']);
        const probes = [...plan.matchAll(/"Index Name":"jobs_\d_pkey"[^{}]*"Actual Loops":(\d+)/g)];
        // One probe per partition in the plan (the generic plan cannot know the slot)...
        expect(probes).toHaveLength(8);
        // ...of which only the rows' own runs: the others are pruned when the statement runs (an
        // array of the picked ids alone had probed all eight, id by id).
        expect(probes.filter((m) => m[1] !== '0')).toHaveLength(1);
        expect(plan).toContain('"Actual Rows":10');
      } finally {
        await session.query('ROLLBACK');
      }
    } finally {
      session.release();
    }
  });
});

describe('batch writes naming many claimed jobs', () => {
  it('read only the rows they name, however many other jobs are claimed (no item compared with every row)', async () => {
    const client = api(app);
    for (let b = 0; b < 4; b++) {
      await client.enqueueBatch(
        'plans-many',
        Array.from({ length: 1000 }, (_, i) => ({ payload: i })),
      );
    }
    const claimed: { id: string; lease_token: string }[] = [];
    for (let b = 0; b < 4; b++) {
      claimed.push(...(await client.claim('plans-many', { max_jobs: 1000 })).body.jobs);
    }
    expect(claimed).toHaveLength(4000);
    const named = claimed.filter((_, i) => i % 8 === 0).map((j) => ({ id: j.id, leaseToken: j.lease_token }));
    const statements = {
      'batch renew': (await recordStatements((db) => renewLeases(db, named)))[0]!,
      'batch ack': (await recordStatements((db) => ackBriefEach(db, named)))[0]!,
    };
    const session = await app.dbPool.connect();
    try {
      await session.query('ANALYZE baton.jobs');
      await session.query(`SET plan_cache_mode = force_generic_plan`);
      for (const [name, compiled] of Object.entries(statements)) {
        const statement = `many_${name.replace(/\W+/g, '_')}`;
        await session.query('BEGIN');
        try {
          await session.query(`PREPARE ${statement} AS ${compiled.sql}`);
          const args = compiled.parameters.map(literal).join(', ');
          const { rows } = await session.query(
            `EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE ${statement}(${args})`,
          );
          const plan = JSON.stringify(rows[0]['QUERY PLAN']);
          // Every named lease is written once...
          expect(plan, name).toContain(`"Actual Rows":${named.length}`);
          // ...and no row is read only to be thrown away: the old batch renew joined its 500 items to
          // every claimed row of each partition and threw away 249,500 pairs.
          const removed = [...plan.matchAll(/"Rows Removed by (?:Join )?Filter":(\d+)/g)].reduce(
            (n, m) => n + Number(m[1]),
            0,
          );
          expect(removed, name).toBe(0);
        } finally {
          await session.query('ROLLBACK');
        }
      }
    } finally {
      session.release();
    }
  });
});

/** A statement's plan counts in one session (pg_prepared_statements). */
interface PlanCounts {
  statement: string;
  generic_plans: string;
  custom_plans: string;
}

/**
 * Run `work` on a one-connection pool of the server's request role (one session, so one plan cache),
 * then answer that session's prepared statements and how often each was planned generic or custom.
 */
async function plansAfter(work: (db: Db) => Promise<void>): Promise<PlanCounts[]> {
  const handle = createDatabase(
    database.url,
    { poolSize: 1, statementTimeoutMs: 30_000, connectTimeoutMs: 5_000 },
    noLog,
  );
  try {
    await work(handle.db);
    const { rows } = await sql<PlanCounts>`
      SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements`.execute(handle.db);
    return rows;
  } finally {
    await handle.close();
  }
}

describe('the flow claims', () => {
  it('settle on generic plans: a statement planned afresh on every claim cost as much as running it', async () => {
    const client = api(app);
    expect(
      (
        await client.call('PUT', '/v1/queues/plans-flow', {
          concurrency_limit: 10_000,
          group_concurrency_limit: 10_000,
        })
      ).status,
    ).toBe(201);
    await client.enqueueBatch(
      'plans-flow',
      Array.from({ length: 400 }, (_, i) => ({ payload: i, group: `g${i % 3}` })),
    );
    await client.enqueueBatch(
      'plans-grouped',
      Array.from({ length: 400 }, (_, i) => ({ payload: i, group: `g${i % 3}` })),
    );
    expect((await client.call('PUT', '/v1/queues/plans-limited', { concurrency_limit: 10_000 })).status).toBe(
      201,
    );
    await client.enqueueBatch(
      'plans-limited',
      Array.from({ length: 400 }, (_, i) => ({ payload: i })),
    );
    const rows = await plansAfter(async (db) => {
      for (let i = 0; i < 12; i++) {
        for (const queue of ['plans-flow', 'plans-grouped', 'plans-limited']) {
          const jobs = await claimJobs(db, { queue, maxJobs: 10, defaultLeaseMs: 30_000 });
          expect(jobs.length).toBeGreaterThan(0);
          await ackBriefEach(
            db,
            jobs.map((j) => ({ id: j.id, leaseToken: j.lease_token })),
          );
        }
      }
    });
    const of = (re: RegExp) => rows.filter((r) => re.test(r.statement));
    const walks = of(/WITH RECURSIVE walk\(n, g, wrapped\)/);
    const grouped = of(/WITH RECURSIVE settings[\s\S]*turn AS \(/);
    const limited = of(/WITH RECURSIVE settings[\s\S]*baton\.flow_budget/);
    expect(walks.length).toBeGreaterThan(0);
    expect(grouped.length).toBeGreaterThan(0);
    expect(limited.length).toBeGreaterThan(0);
    // The request pool runs every statement on its generic plan: never a custom plan, for the walk
    // (left to choose, its plan cache planned it afresh on every claim) nor any other claim.
    for (const r of [...walks, ...grouped, ...limited]) {
      expect(Number(r.custom_plans), r.statement.slice(0, 80)).toBe(0);
      expect(Number(r.generic_plans), r.statement.slice(0, 80)).toBeGreaterThan(0);
    }
  });
});

describe('the ack and the renewals', () => {
  it('run on generic plans, never planned afresh (a single ack planned on every run cost PostgreSQL twice the CPU)', async () => {
    await api(app).enqueueBatch(
      'plans-cache',
      Array.from({ length: 40 }, (_, i) => ({ payload: i })),
    );
    const rows = await plansAfter(async (db) => {
      for (let i = 0; i < 10; i++) {
        const jobs = await claimJobs(db, { queue: 'plans-cache', maxJobs: 2, defaultLeaseMs: 30_000 });
        const items = jobs.map((j) => ({ id: j.id, leaseToken: j.lease_token }));
        expect(items).toHaveLength(2);
        for (const out of await renewLeases(db, items)) expect(out.outcome).toBe('done');
        expect(await ackEach(db, [items[0]!])).toHaveLength(1);
        expect((await ackBriefEach(db, [items[1]!]))[0]?.id).toBe(items[1]!.id);
      }
    });
    const writes = rows.filter((r) => /DELETE FROM baton\.jobs|FOR UPDATE OF j/.test(r.statement));
    // The single ack, the batch ack and the batch renew (each naming one slot).
    expect(writes.length).toBeGreaterThanOrEqual(3);
    for (const r of writes) {
      expect(Number(r.custom_plans), r.statement.slice(0, 80)).toBe(0);
      expect(Number(r.generic_plans), r.statement.slice(0, 80)).toBeGreaterThanOrEqual(10);
    }
  });
});
