import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { BatonApp } from '../../src/app.js';
import { checkSessionSettings } from '../../src/db/session-settings.js';
import { createTestApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { api } from '../support/http.js';
import { type PgBouncer, startPgBouncer } from '../support/pgbouncer.js';
import { freePort } from '../support/ports.js';
import { ServerProcess } from '../support/server-process.js';
import { until } from '../support/until.js';

/**
 * Baton behind a real PgBouncer (Debian's package) in transaction mode, its other settings its
 * defaults: start-up, the lifecycle, two replicas electing one leader that re-arms a lost lease,
 * polling where LISTEN cannot go, migrations refused through it, and the timeouts as role settings.
 */
const database = useTestDatabase();
let bouncer: PgBouncer;
beforeAll(async () => {
  bouncer = await startPgBouncer(inject('adminUrl'));
});
afterAll(async () => bouncer?.stop());

const POOLED = { BATON_DB_POOLER: 'transaction' };

/** Runs src/server.ts to its end (a start-up that fails) and answers what it printed. */
async function failedStart(env: Record<string, string>) {
  try {
    await promisify(execFile)(process.execPath, ['--import', 'tsx', 'src/server.ts'], {
      env: { ...process.env, LOG_LEVEL: 'warn', HOST: '127.0.0.1', PORT: '0', ...env },
      timeout: 30_000,
    });
  } catch (err) {
    const { code, stderr } = err as { code: number; stderr: string };
    return { code, stderr };
  }
  throw new Error('the server started');
}

describe('start-up behind PgBouncer', () => {
  it('without BATON_DB_POOLER, stops with one line naming the setting (PgBouncer refuses settings sent at connect)', async () => {
    const { code, stderr } = await failedStart({ DATABASE_URL: bouncer.url(database.name) });
    expect(code).toBe(1);
    expect(stderr).toContain('is a connection pooler that refuses settings sent at connect');
    expect(stderr).toContain('unsupported startup parameter');
    expect(stderr).toContain('set BATON_DB_POOLER=transaction');
  });

  it('refuses to migrate through the pooler, and migrates over BATON_DIRECT_DATABASE_URL, then serves through it', async () => {
    const fresh = `${database.name}_fresh`;
    await sql.raw(`CREATE DATABASE ${fresh}`).execute(database.db);
    try {
      const through = bouncer.url(fresh);
      const refused = await failedStart({ ...POOLED, DATABASE_URL: through });
      expect(refused.code).toBe(1);
      expect(refused.stderr).toContain(
        'migrations to apply, but migrations need a connection to PostgreSQL itself',
      );
      expect(refused.stderr).toContain('BATON_DIRECT_DATABASE_URL');
      // Nothing was half-applied through the pooler.
      const direct = new URL(database.url);
      direct.pathname = `/${fresh}`;
      const port = await freePort();
      const server = await ServerProcess.start(
        { ...POOLED, DATABASE_URL: through, BATON_DIRECT_DATABASE_URL: direct.toString(), LOG_LEVEL: 'info' },
        port,
      );
      try {
        expect(server.output).toContain('migrations applied');
        expect(server.output).toContain('listening for job notifications');
        // The timeouts are not this role's settings in this database: start-up says so, with the fix.
        const warning = server.output.split('\n').find((l) => l.includes('database session timeouts'));
        expect(JSON.parse(warning!)).toMatchObject({ level: 40, statement_timeout_ms: 0 });
        expect(warning).toContain(`IN DATABASE \\"${fresh}\\" SET statement_timeout = '30000ms'`);
        const base = `http://127.0.0.1:${port}`;
        const enq = await fetch(`${base}/v1/queues/start/jobs`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ payload: { n: 1 } }),
        });
        expect(enq.status).toBe(201);
        expect((await fetch(`${base}/readyz`)).status).toBe(200);
      } finally {
        server.signal('SIGTERM');
        await server.exited;
      }
    } finally {
      await sql.raw(`DROP DATABASE IF EXISTS ${fresh} WITH (FORCE)`).execute(database.db);
    }
  });
});

describe('the lifecycle through PgBouncer in transaction mode', () => {
  let app: BatonApp;
  beforeAll(async () => {
    app = await createTestApp({ url: bouncer.url(database.name) }, POOLED);
  });
  afterAll(async () => app?.close());

  it('enqueue, claim, renew, nack, claim again, ack, batches and an await, every answer as without it', async () => {
    const client = api(app);
    const enq = await client.enqueue('pooled', { payload: { n: 1 }, max_attempts: 3 });
    expect(enq.status).toBe(201);
    const first = (await client.claim('pooled', { lease_ms: 5000 })).body.jobs[0];
    expect(first).toMatchObject({ id: enq.body.id, attempt: 1, payload: { n: 1 } });
    expect((await client.renew(first.id, { lease_token: first.lease_token, lease_ms: 8000 })).status).toBe(
      200,
    );
    const nack = await client.nack(first.id, {
      lease_token: first.lease_token,
      retry_in_ms: 0,
      error: { message: 'x' },
    });
    expect(nack.status).toBe(200);
    const second = (await client.claim('pooled')).body.jobs[0];
    expect(second).toMatchObject({ id: enq.body.id, attempt: 2 });
    const ack = await client.ack(second.id, { lease_token: second.lease_token, result: { ok: true } });
    expect(ack.status).toBe(200);
    expect((await client.get(enq.body.id)).body).toMatchObject({ state: 'completed', result: { ok: true } });

    const batch = await client.enqueueBatch(
      'pooled-batch',
      Array.from({ length: 200 }, (_, i) => ({ payload: i })),
    );
    expect(batch.status).toBe(201);
    const claimed: { id: string; lease_token: string }[] = [];
    while (claimed.length < 200) {
      const jobs = (await client.claim('pooled-batch', { max_jobs: 50 })).body.jobs;
      expect(jobs.length).toBeGreaterThan(0);
      claimed.push(...jobs);
    }
    expect(new Set(claimed.map((j) => j.id)).size).toBe(200);
    const acked = await client.ackBatch(claimed.map((j) => ({ id: j.id, lease_token: j.lease_token })));
    expect(acked.status).toBe(200);
    const { rows } = await sql<{ n: string }>`
      SELECT count(*) AS n FROM baton.job_history WHERE queue = 'pooled-batch' AND state = 'completed'`.execute(
      database.db,
    );
    expect(Number(rows[0]!.n)).toBe(200);

    // An await is answered when another request completes the job.
    const job = (await client.enqueue('pooled-await', { payload: {} })).body;
    const awaited = client.call('GET', `/v1/jobs/${job.id}?wait_ms=10000`);
    const taken = (await client.claim('pooled-await')).body.jobs[0];
    await client.ack(taken.id, { lease_token: taken.lease_token });
    expect((await awaited).body).toMatchObject({ id: job.id, state: 'completed' });
  });

  it('sends no named statement (they would not outlive the transaction on its server connection)', async () => {
    await api(app).enqueue('pooled', { payload: {} });
    const { rows } = await sql<{ n: string }>`SELECT count(*) AS n FROM pg_prepared_statements`.execute(
      app.db,
    );
    expect(Number(rows[0]!.n)).toBe(0);
  });
});

describe('replicas behind PgBouncer', () => {
  const replicas: BatonApp[] = [];
  beforeAll(async () => {
    for (let i = 0; i < 2; i++) {
      replicas.push(
        await createTestApp(
          { url: bouncer.url(database.name) },
          { ...POOLED, BATON_MAINTENANCE: 'true', BATON_TICK_MS: '200', BATON_POLL_INTERVAL_MS: '200' },
        ),
      );
    }
  });
  afterAll(async () => Promise.all(replicas.map((r) => r.close())));

  it('elect one leader, which re-arms an expired lease so that the other replica claims the job', async () => {
    const [a, b] = replicas as [BatonApp, BatonApp];
    await until(async () => {
      const { rows } = await sql<{ holder: string }>`
        SELECT holder FROM baton.leader WHERE name = 'maintenance' AND expires_at > now()`.execute(
        database.db,
      );
      return rows.length === 1;
    });
    const enq = await api(a).enqueue('pooled-lease', { payload: {}, max_attempts: 3 });
    const lost = (await api(a).claim('pooled-lease', { lease_ms: 1000 })).body.jobs[0];
    expect(lost.id).toBe(enq.body.id);
    // Never acked: the leader re-arms it once its lease ends, and a waiting claim on the other
    // replica takes it (found by polling: without a direct URL no replica LISTENs).
    const again = await api(b).claim('pooled-lease', { wait_ms: 10_000 });
    expect(again.body.jobs[0]).toMatchObject({ id: enq.body.id, attempt: 2 });
    expect((await api(a).ack(lost.id, { lease_token: lost.lease_token })).status).toBe(409);
    const leaders = await Promise.all(
      replicas.map(
        async (r) =>
          (await r.inject({ method: 'GET', url: '/metrics' })).body.match(/^baton_leader (\d)/m)?.[1],
      ),
    );
    expect(leaders.sort()).toEqual(['0', '1']);
  });

  it('a claim waiting on one replica gets a job enqueued on the other, without LISTEN', async () => {
    const [a, b] = replicas as [BatonApp, BatonApp];
    const waiting = api(b).claim('pooled-poll', { wait_ms: 10_000 });
    await new Promise((r) => setTimeout(r, 100));
    const enq = await api(a).enqueue('pooled-poll', { payload: { from: 'a' } });
    const got = await waiting;
    expect(got.body.jobs.map((j: { id: string }) => j.id)).toEqual([enq.body.id]);
  });
});

describe("the timeouts as the role's settings", () => {
  let app: BatonApp;
  let second: PgBouncer;
  beforeAll(async () => {
    const roles = await sql<{ r: string }>`SELECT current_user AS r`.execute(database.db);
    const role = roles.rows[0]!.r;
    await sql
      .raw(
        `ALTER ROLE "${role}" IN DATABASE ${database.name} SET statement_timeout = '500ms';` +
          `ALTER ROLE "${role}" IN DATABASE ${database.name} SET idle_in_transaction_session_timeout = '500ms'`,
      )
      .execute(database.db);
    // A PgBouncer of its own: a role's settings reach sessions opened after they were set.
    second = await startPgBouncer(inject('adminUrl'));
    app = await createTestApp(
      { url: second.url(database.name) },
      { ...POOLED, BATON_STATEMENT_TIMEOUT_MS: '500' },
    );
  });
  afterAll(async () => {
    await app?.close();
    await second?.stop();
  });

  it('hold through the pooler: start-up finds them, a long statement is cancelled and an idle transaction ended', async () => {
    const check = await checkSessionSettings(app.db, app.config);
    expect(check.fix).toEqual([]);
    expect(check.settings.map((s) => s.hasMs)).toEqual([500, 500]);
    await expect(sql`SELECT pg_sleep(2)`.execute(app.db)).rejects.toMatchObject({ code: '57014' });
    await expect(
      app.db.transaction().execute(async (trx) => {
        await sql`SELECT 1`.execute(trx);
        await new Promise((r) => setTimeout(r, 1200));
        await sql`SELECT 1`.execute(trx);
      }),
    ).rejects.toThrow();
    // The pool goes on serving.
    expect((await api(app).enqueue('pooled-timeouts', { payload: {} })).status).toBe(201);
  });
});

describe('PgBouncer in session mode', () => {
  let app: BatonApp;
  let session: PgBouncer;
  beforeAll(async () => {
    session = await startPgBouncer(inject('adminUrl'), { pool_mode: 'session' });
    app = await createTestApp({ url: session.url(database.name) }, { BATON_DB_POOLER: 'session' });
  });
  afterAll(async () => {
    await app?.close();
    await session?.stop();
  });

  it('gets its settings by SET after connecting: the timeouts hold, and the lifecycle runs', async () => {
    const check = await checkSessionSettings(app.db, app.config);
    expect(check.fix).toEqual([]);
    const { rows } = await sql<{ s: string }>`SELECT current_setting('enable_seqscan') AS s`.execute(app.db);
    expect(rows[0]!.s).toBe('off');
    const client = api(app);
    const enq = await client.enqueue('session-mode', { payload: { n: 1 } });
    const job = (await client.claim('session-mode')).body.jobs[0];
    expect(job.id).toBe(enq.body.id);
    expect((await client.ack(job.id, { lease_token: job.lease_token })).status).toBe(200);
  });
});
