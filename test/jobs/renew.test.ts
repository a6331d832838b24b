import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { createDatabase } from '../../src/db/database.js';
import { startEmbeddedPostgres } from '../../src/db/embedded-postgres.js';
import { migrateToLatest } from '../../src/db/migrate.js';
import { claimJobs } from '../../src/jobs/claim/claim.js';
import { enqueueJobs } from '../../src/jobs/enqueue/enqueue.js';
import { renewLease, renewLeases } from '../../src/jobs/renew.js';
import { noLog } from '../../src/logger.js';
import { useTestApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { api, enqueueAndClaim, enqueueAndClaimMany } from '../support/http.js';
import { freePort } from '../support/ports.js';

const database = useTestDatabase();
const app = useTestApp(database, { BATON_BACKOFF_BASE_MS: '1000' });

const quiet = noLog;
const UNKNOWN_TOKEN = '00000000-0000-4000-8000-000000000000';

async function _expire(id: string) {
  await sql`UPDATE baton.jobs SET lease_expires_at = now() - interval '1 second' WHERE id = ${id}`.execute(
    database.db,
  );
}

describe('renew', () => {
  it('pushes the lease forward, by the claimed length or by lease_ms', async () => {
    const job = await enqueueAndClaim(app, 'r-renew', { payload: 1 }, { lease_ms: 10_000 });
    const renewed = await api(app).renew(job.id, { lease_token: job.lease_token });
    expect(renewed.status).toBe(200);
    expect(renewed.body).toMatchObject({ id: job.id, lease_ms: 10_000 });
    expect(Date.parse(renewed.body.lease_expires_at)).toBeGreaterThanOrEqual(
      Date.parse(job.lease_expires_at),
    );
    const longer = await api(app).renew(job.id, { lease_token: job.lease_token, lease_ms: 600_000 });
    expect(Date.parse(longer.body.lease_expires_at) - Date.now()).toBeGreaterThan(590_000);
    // The next renew without lease_ms keeps the new length.
    const again = await api(app).renew(job.id, { lease_token: job.lease_token });
    expect(again.body.lease_ms).toBe(600_000);
  });

  it('is a HOT update: a burst of renewals writes no index entries', async () => {
    // A PostgreSQL of its own: page pruning, which makes room for the next in-place update, keeps
    // every row version that a snapshot anywhere in the cluster may still see, in any database. A
    // transaction held open in another database of a shared server took single renewals from 100%
    // HOT to 48%, and batch renewals from 77% to 31%; the tests running beside this one do that by
    // moments. Alone on its cluster, the figures are the design's, every time.
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'baton-hot-'));
    await fs.chmod(dir, 0o755);
    const server = await startEmbeddedPostgres({
      dataDir: path.join(dir, 'pgdata'),
      port: await freePort(),
      log: quiet,
    });
    // One connection does all the work, so the table statistics count exactly its statements.
    const handle = createDatabase(
      server.url,
      { poolSize: 1, statementTimeoutMs: 30_000, connectTimeoutMs: 5000 },
      quiet,
    );
    try {
      const single = handle.db;
      await migrateToLatest(single);
      const opts = {
        autoCreate: { enabled: true, maxQueues: 1000 },
        defaultMaxAttempts: 5,
        idempotencyRetentionMs: 60_000,
      };
      const items = Array.from({ length: 200 }, (_, i) => ({ payloadJson: String(i), priority: 0 }));
      await enqueueJobs(single, 'hot', items, opts);
      const jobs = await claimJobs(single, { queue: 'hot', maxJobs: 200, defaultLeaseMs: 60_000 });
      const stats = async () => {
        await sql`SELECT pg_stat_force_next_flush()`.execute(single);
        const { rows } = await sql<{ upd: number; hot: number }>`
          SELECT sum(n_tup_upd)::int AS upd, sum(n_tup_hot_upd)::int AS hot FROM pg_stat_user_tables
          WHERE schemaname = 'baton' AND relname ~ '^jobs_[0-9]+$'`.execute(single);
        return rows[0]!;
      };
      const before = await stats();
      for (let round = 0; round < 3; round++) {
        for (const job of jobs)
          expect(await renewLease(single, { id: job.id, leaseToken: job.lease_token })).toMatchObject({
            outcome: 'done',
          });
      }
      let after = await stats();
      for (let i = 0; i < 50 && after.upd - before.upd < 600; i++) after = await stats();
      expect(after.upd - before.upd).toBe(600);
      // Every one: the renewal changes no indexed column, and each page has room (fillfactor 70,
      // and the versions the previous renewals left are pruned when the page is next read).
      expect(after.hot - before.hot).toBe(600);

      // Batch renewals (POST /v1/jobs/renew) are the same update, 200 rows a statement. Mostly HOT,
      // but not all: PostgreSQL prunes a page when a statement first reads it, so one statement
      // rewriting every row of a page can run out of room on it (77% here, where the 200 jobs share
      // a few pages). A non-HOT renewal still adds nothing to the ready index that claims walk (a
      // claimed row is not in it).
      const leases = jobs.map((j) => ({ id: j.id, leaseToken: j.lease_token }));
      for (let round = 0; round < 3; round++) {
        expect((await renewLeases(single, leases)).every(Boolean)).toBe(true);
      }
      let batched = await stats();
      for (let i = 0; i < 50 && batched.upd - after.upd < 600; i++) batched = await stats();
      expect(batched.upd - after.upd).toBe(600);
      expect((batched.hot - after.hot) / 600).toBeGreaterThanOrEqual(0.75);
    } finally {
      await handle.close();
      await server.stop();
      await fs.rm(dir, { recursive: true, force: true });
    }
  }, 120_000);

  it('with an id or token that cannot be one is 400 naming it (409 and 404: lease-lost.test.ts)', async () => {
    const job = await enqueueAndClaim(app, 'r-wrong');
    const huge = await api(app).renew('9999999999999999999', { lease_token: job.lease_token });
    expect(huge.status).toBe(400);
    expect(huge.body.detail).toBe(
      'id must be a job id: a decimal number without leading zeros, at most 18 digits',
    );
    const malformed = await api(app).renew(job.id, { lease_token: 'not-a-uuid' });
    expect(malformed.status).toBe(400);
    expect(malformed.body.detail).toBe(
      'lease_token must be a lease token: a UUID such as 3f0e9a52-6a43-4a0c-9d4e-52d1b6e0c001',
    );
  });
});

describe('renew in a batch', () => {
  it('answers each item on its own: renewed with its new expiry, lease_lost, not_found', async () => {
    const q = 'r-batch';
    const jobs = await enqueueAndClaimMany(app, q, 4, { lease_ms: 5000 });
    const sentAt = Date.now();
    const res = await api(app).renewBatch([
      { id: jobs[0].id, lease_token: jobs[0].lease_token },
      { id: jobs[1].id, lease_token: UNKNOWN_TOKEN },
      { id: '99999999', lease_token: jobs[2].lease_token },
      { id: jobs[3].id, lease_token: jobs[3].lease_token, lease_ms: 600_000 },
    ]);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      results: [
        { id: jobs[0].id, outcome: 'renewed', lease_ms: 5000 },
        { id: jobs[1].id, outcome: 'lease_lost' },
        { id: '99999999', outcome: 'not_found' },
        { id: jobs[3].id, outcome: 'renewed', lease_ms: 600_000 },
      ],
      renewed: 2,
      failed: 2,
    });
    expect(res.body.results[1]).not.toHaveProperty('lease_expires_at');
    // Each renewed lease runs from the renewal, with its own length; the others are untouched.
    expect(Date.parse(res.body.results[0].lease_expires_at)).toBeGreaterThanOrEqual(sentAt + 5000 - 5);
    expect(Date.parse(res.body.results[3].lease_expires_at)).toBeGreaterThanOrEqual(sentAt + 600_000 - 5);
    const rows = await database.db
      .selectFrom('baton.jobs')
      .select(['id', 'lease_expires_at'])
      .where('id', 'in', [jobs[0].id, jobs[1].id, jobs[3].id])
      .orderBy('id')
      .execute();
    const expiry = new Map(rows.map((r) => [String(r.id), r.lease_expires_at?.toISOString()]));
    expect(expiry.get(jobs[0].id)).toBe(res.body.results[0].lease_expires_at);
    expect(expiry.get(jobs[1].id)).toBe(jobs[1].lease_expires_at);
    expect(expiry.get(jobs[3].id)).toBe(res.body.results[3].lease_expires_at);
  });

  it('rejects a repeated id or a bad lease_ms with a 400 naming the item, and renews nothing', async () => {
    const job = await enqueueAndClaim(app, 'r-batch-bad');
    const repeated = await api(app).renewBatch([
      { id: job.id, lease_token: job.lease_token },
      { id: job.id, lease_token: job.lease_token },
    ]);
    expect(repeated.status).toBe(400);
    expect(repeated.body.detail).toBe(`renewals[1].id repeats job ${job.id}`);
    const tooShort = await api(app).renewBatch([
      { id: job.id, lease_token: job.lease_token },
      { id: '1', lease_token: job.lease_token, lease_ms: 10 },
    ]);
    expect(tooShort.status).toBe(400);
    expect(tooShort.body.errors[0].field).toBe('renewals[1].lease_ms');
    expect((await api(app).renewBatch([])).status).toBe(400);
    const row = await database.db
      .selectFrom('baton.jobs')
      .select('lease_expires_at')
      .where('id', '=', job.id)
      .executeTakeFirstOrThrow();
    expect(row.lease_expires_at?.toISOString()).toBe(job.lease_expires_at);
  });
});
