import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { createDatabase, type Db } from '../../src/db/database.js';
import { startEmbeddedPostgres } from '../../src/db/embedded-postgres.js';
import { migrateToLatest } from '../../src/db/migrate.js';
import { claimJobs } from '../../src/jobs/claim/claim.js';
import { enqueueJobs } from '../../src/jobs/enqueue/enqueue.js';
import { PROGRESS_MAX_BYTES } from '../../src/jobs/limits.js';
import { renewLeases } from '../../src/jobs/renew.js';
import { noLog } from '../../src/logger.js';
import { promoteDueJobs } from '../../src/maintenance/promote.js';
import { useTestApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { api, enqueueAndClaim, enqueueAndClaimMany } from '../support/http.js';
import { freePort } from '../support/ports.js';

/** A renewal may carry the worker's progress: kept on the job, latest wins, shown wherever the job is. */
const database = useTestDatabase();
const app = useTestApp(database);

const list = (queue: string, state: string) =>
  api(app).call('GET', `/v1/queues/${queue}/jobs?state=${state}`);

describe('progress on renew', () => {
  it('is kept on the job, latest wins; a renewal without it keeps it, null clears it', async () => {
    const job = await enqueueAndClaim(app, 'p-basic');
    expect((await api(app).get(job.id)).body.progress).toBeNull();
    const first = await api(app).renew(job.id, {
      lease_token: job.lease_token,
      progress: { done: 1, of: 4 },
    });
    expect(first.status).toBe(200);
    expect(first.body).not.toHaveProperty('progress');
    expect((await api(app).get(job.id)).body.progress).toEqual({ done: 1, of: 4 });
    await api(app).renew(job.id, { lease_token: job.lease_token, progress: { done: 3, of: 4 } });
    await api(app).renew(job.id, { lease_token: job.lease_token });
    expect((await api(app).get(job.id)).body.progress).toEqual({ done: 3, of: 4 });
    const listed = await list('p-basic', 'claimed');
    expect(listed.body.jobs.find((j: { id: string }) => j.id === job.id).progress).toEqual({
      done: 3,
      of: 4,
    });
    await api(app).renew(job.id, { lease_token: job.lease_token, progress: 'almost' });
    expect((await api(app).get(job.id)).body.progress).toBe('almost');
    await api(app).renew(job.id, { lease_token: job.lease_token, progress: null });
    expect((await api(app).get(job.id)).body.progress).toBeNull();
  });

  it('a stale lease writes no progress', async () => {
    const job = await enqueueAndClaim(app, 'p-stale');
    const res = await api(app).renew(job.id, {
      lease_token: '00000000-0000-4000-8000-000000000000',
      progress: 50,
    });
    expect(res.status).toBe(409);
    expect((await api(app).get(job.id)).body.progress).toBeNull();
  });

  it('in a batch, each item on its own: with, without, and null', async () => {
    const jobs = await enqueueAndClaimMany(app, 'p-batch', 3);
    await api(app).renewBatch(jobs.map((j) => ({ id: j.id, lease_token: j.lease_token, progress: 'old' })));
    const res = await api(app).renewBatch([
      { id: jobs[0].id, lease_token: jobs[0].lease_token, progress: { step: 2 } },
      { id: jobs[1].id, lease_token: jobs[1].lease_token },
      { id: jobs[2].id, lease_token: jobs[2].lease_token, progress: null },
    ]);
    expect(res.body).toMatchObject({ renewed: 3, failed: 0 });
    const progress = await Promise.all(jobs.map(async (j) => (await api(app).get(j.id)).body.progress));
    expect(progress).toEqual([{ step: 2 }, 'old', null]);
  });

  it(`beyond ${PROGRESS_MAX_BYTES} bytes is 413 naming the field, and nothing is renewed`, async () => {
    const job = await enqueueAndClaim(app, 'p-big');
    const big = 'x'.repeat(PROGRESS_MAX_BYTES);
    const single = await api(app).renew(job.id, { lease_token: job.lease_token, progress: big });
    expect(single.status).toBe(413);
    expect(single.body).toMatchObject({ code: 'payload_too_large' });
    expect(single.body.detail).toMatch(/^progress is \d+ bytes of JSON; the limit is 4096$/);
    const batch = await api(app).renewBatch([
      { id: job.id, lease_token: job.lease_token, progress: 1 },
      { id: '987654321', lease_token: job.lease_token, progress: big },
    ]);
    expect(batch.status).toBe(413);
    expect(batch.body.detail).toContain('renewals[1].progress');
    expect((await api(app).get(job.id)).body.progress).toBeNull();
    const bad = await api(app).renew(job.id, { lease_token: job.lease_token, progress: 'a\u0000b' });
    expect(bad.status).toBe(400);
    expect(bad.body.detail).toContain('progress');
  });

  it('is kept through a retry and when the job finishes; a redrive clears it', async () => {
    const job = await enqueueAndClaim(app, 'p-moves', { payload: 1, max_attempts: 3 });
    await api(app).renew(job.id, { lease_token: job.lease_token, progress: { at: 'first' } });
    // Retried later: the job moves to baton.scheduled_jobs and back.
    await api(app).nack(job.id, { lease_token: job.lease_token, retry_in_ms: 60_000 });
    expect((await api(app).get(job.id)).body).toMatchObject({
      state: 'scheduled',
      progress: { at: 'first' },
    });
    await sql`UPDATE baton.scheduled_jobs SET run_at = now() WHERE id = ${job.id}`.execute(app.db);
    await promoteDueJobs(app.db, 100, 100);
    const again = (await api(app).claim('p-moves')).body.jobs[0];
    expect(again.id).toBe(job.id);
    expect((await api(app).get(job.id)).body.progress).toEqual({ at: 'first' });
    await api(app).renew(job.id, { lease_token: again.lease_token, progress: { at: 'second' } });
    await api(app).nack(job.id, { lease_token: again.lease_token, dead: true, error: { message: 'no' } });
    const dead = (await api(app).get(job.id)).body;
    expect(dead).toMatchObject({ state: 'dead', progress: { at: 'second' } });
    expect((await list('p-moves', 'dead')).body.jobs[0].progress).toEqual({ at: 'second' });
    await api(app).call('POST', '/v1/queues/p-moves/redrive', { all: true });
    expect((await api(app).get(job.id)).body).toMatchObject({ state: 'ready', progress: null });

    const acked = await enqueueAndClaim(app, 'p-ack');
    await api(app).renew(acked.id, { lease_token: acked.lease_token, progress: 99 });
    await api(app).ack(acked.id, { lease_token: acked.lease_token, result: 'done' });
    expect((await api(app).get(acked.id)).body).toMatchObject({
      state: 'completed',
      progress: 99,
      result: 'done',
    });
  });
});

describe('progress and HOT renewals', () => {
  it('a renewal with a small progress report stays HOT; one without sends the statement it always did', async () => {
    // A PostgreSQL of its own, as in renew.test.ts: a transaction held open anywhere on a shared
    // cluster keeps pages from being pruned, and the figures would be the neighbours'.
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'baton-hot-progress-'));
    await fs.chmod(dir, 0o755);
    const server = await startEmbeddedPostgres({
      dataDir: path.join(dir, 'pgdata'),
      port: await freePort(),
      log: noLog,
    });
    const handle = createDatabase(
      server.url,
      { poolSize: 1, statementTimeoutMs: 30_000, connectTimeoutMs: 5000 },
      noLog,
    );
    try {
      const db = handle.db;
      await migrateToLatest(db);
      const opts = {
        autoCreate: { enabled: true, maxQueues: 10 },
        defaultMaxAttempts: 5,
        idempotencyRetentionMs: 60_000,
      };
      await enqueueJobs(
        db,
        'hot-p',
        Array.from({ length: 200 }, (_, i) => ({ payloadJson: String(i), priority: 0 })),
        opts,
      );
      const jobs = await claimJobs(db, { queue: 'hot-p', maxJobs: 200, defaultLeaseMs: 60_000 });
      const share = async (progressOf: (round: number) => string | undefined) => {
        const before = await stats(db);
        for (let round = 0; round < 3; round++) {
          for (const job of jobs) {
            const [out] = await renewLeases(db, [
              { id: job.id, leaseToken: job.lease_token, progressJson: progressOf(round) },
            ]);
            expect(out!.outcome).toBe('done');
          }
        }
        let after = await stats(db);
        for (let i = 0; i < 50 && after.upd - before.upd < 600; i++) after = await stats(db);
        expect(after.upd - before.upd).toBe(600);
        return (after.hot - before.hot) / 600;
      };
      const small = await share((round) => JSON.stringify({ done: round * 10 + 7, of: 100 }));
      const none = await share(() => undefined);
      // A report of a kilobyte grows each row by that much: pages fill, and some updates move rows.
      const kilobyte = await share((round) => JSON.stringify({ round, log: 'y'.repeat(1000) }));
      console.log(
        `HOT share of single renewals: with a 27-byte progress ${small}, without ${none}, with a 1 KB progress ${kilobyte}`,
      );
      expect(small).toBe(1);
      expect(none).toBe(1);
    } finally {
      await handle.close();
      await server.stop();
      await fs.rm(dir, { recursive: true, force: true });
    }
  }, 120_000);
});

async function stats(db: Db) {
  await sql`SELECT pg_stat_force_next_flush()`.execute(db);
  const { rows } = await sql<{ upd: number; hot: number }>`
    SELECT sum(n_tup_upd)::int AS upd, sum(n_tup_hot_upd)::int AS hot FROM pg_stat_user_tables
    WHERE schemaname = 'baton' AND relname ~ '^jobs_[0-9]+$'`.execute(db);
  return rows[0]!;
}
