import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { claimJobs } from '../../src/jobs/claim/claim.js';
import { enqueueJobs } from '../../src/jobs/enqueue/enqueue.js';
import { ExpiryDuty, expireJobs } from '../../src/maintenance/expiry.js';
import { Metrics } from '../../src/metrics/metrics.js';
import { useTestApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { api } from '../support/http.js';

const database = useTestDatabase();
const app = useTestApp(database);

const opts = {
  autoCreate: { enabled: true, maxQueues: 1000 },
  defaultMaxAttempts: 5,
  idempotencyRetentionMs: 60_000,
};

describe('expiry sweep', () => {
  it('moves expired ready and scheduled jobs to dead with reason expired, and counts them', async () => {
    const client = api(app);
    const past = new Date(Date.now() - 1000).toISOString();
    // An enqueue that could never run is refused, so the expiry is moved into the past afterwards.
    const ready = await client.enqueue('exs-basic', { payload: 'r', expires_in_ms: 60_000 });
    const scheduled = await client.enqueue('exs-basic', {
      payload: 's',
      delay_ms: 60_000,
      expires_in_ms: 120_000,
    });
    for (const table of ['baton.jobs', 'baton.scheduled_jobs']) {
      await sql`UPDATE ${sql.table(table)} SET expires_at = ${past}::timestamptz
                WHERE id IN (${ready.body.id}::bigint, ${scheduled.body.id}::bigint)`.execute(database.db);
    }
    const alive = await client.enqueue('exs-basic', { payload: 'a', expires_in_ms: 60_000 });
    expect(scheduled.body.state).toBe('scheduled');

    const metrics = new Metrics();
    const duty = new ExpiryDuty(database.db, metrics, 1000);
    const result = await duty.runOnce();
    expect(result.expired.get('exs-basic')).toBe(2);
    for (const id of [ready.body.id, scheduled.body.id]) {
      const job = (await client.get(id)).body;
      expect(job).toMatchObject({ state: 'dead', dead_reason: 'expired' });
      expect(job.last_error).toMatchObject({ reason: 'expired', attempt: 0 });
      expect(job.errors).toHaveLength(1);
      expect(job.expires_at).toBe(past);
    }
    expect((await client.get(alive.body.id)).body.state).toBe('ready');
    expect(await metrics.registry.getSingleMetricAsString('baton_jobs_expired_total')).toContain(
      'baton_jobs_expired_total{queue="exs-basic"} 2',
    );
    expect((await duty.runOnce()).total).toBe(0);
    // A dead expired job can be redriven like any other: its expiry, past, is dropped (it would only
    // expire again); one still ahead goes with it.
    const redriven = await client.call('POST', '/v1/queues/exs-basic/redrive', { ids: [ready.body.id] });
    expect(redriven.status).toBe(200);
    expect((await client.get(ready.body.id)).body).toMatchObject({ state: 'ready', expires_at: null });
    expect((await duty.runOnce()).total).toBe(0);
  });

  it('leaves a claimed job alone, however late its expires_at', async () => {
    const client = api(app);
    const job = await client.enqueue('exs-claimed', { payload: {}, expires_in_ms: 60_000 });
    await client.claim('exs-claimed');
    await sql`UPDATE baton.jobs SET expires_at = now() - interval '1 second' WHERE id = ${job.body.id}::bigint`.execute(
      database.db,
    );
    expect((await expireJobs(database.db, 100)).byQueue.get('exs-claimed')).toBeUndefined();
    expect((await client.get(job.body.id)).body.state).toBe('claimed');
  });

  it('claims racing the sweep: each job is claimed or expired, never both, none lost', async () => {
    const queue = 'exs-race';
    const n = 300;
    const enqueued = await enqueueJobs(
      database.db,
      queue,
      Array.from({ length: n }, (_, i) => ({ payloadJson: String(i), priority: 0, expiresInMs: 400 })),
      opts,
    );
    const ids = new Set(enqueued.map((e) => e.job.id));
    const claimed = new Set<string>();
    const started = Date.now();
    const claimers = Array.from({ length: 2 }, async () => {
      while (Date.now() - started < 1500) {
        const jobs = await claimJobs(database.db, { queue, maxJobs: 1, defaultLeaseMs: 60_000 });
        for (const j of jobs) {
          expect(claimed.has(j.id)).toBe(false);
          claimed.add(j.id);
        }
        await new Promise((r) => setTimeout(r, 10));
      }
    });
    const sweeper = (async () => {
      while (Date.now() - started < 1500) {
        await expireJobs(database.db, 50);
        await new Promise((r) => setTimeout(r, 5));
      }
      await expireJobs(database.db, 1000);
    })();
    await Promise.all([...claimers, sweeper]);
    const { rows } = await sql<{ id: string; state: string; dead_reason: string | null }>`
      SELECT id::text, state, NULL AS dead_reason FROM baton.jobs WHERE queue = ${queue}
      UNION ALL
      SELECT id::text, state, dead_reason FROM baton.job_history WHERE queue = ${queue}`.execute(database.db);
    expect(rows).toHaveLength(n);
    for (const r of rows) {
      expect(ids.has(r.id)).toBe(true);
      if (claimed.has(r.id)) expect(r.state).toBe('claimed');
      else expect(r).toMatchObject({ state: 'dead', dead_reason: 'expired' });
    }
    expect(claimed.size).toBeGreaterThan(0);
    expect(claimed.size).toBeLessThan(n);
  });

  it('removes unique-key rows whose job no longer waits, and keeps the others', async () => {
    const client = api(app);
    const held = await client.enqueue('exs-keys', { payload: 1, unique_key: 'held' });
    await client.enqueue('exs-keys', { payload: 2, unique_key: 'gone' });
    await client.claim('exs-keys', { max_jobs: 1 });
    // The first job (held) was claimed: its key is stale. Queue its twin so the other stays waiting.
    const keys = async () =>
      (
        await sql<{
          key: string;
        }>`SELECT key FROM baton.unique_keys WHERE queue = 'exs-keys' ORDER BY key`.execute(database.db)
      ).rows.map((r) => r.key);
    expect(await keys()).toEqual(['gone', 'held']);
    const duty = new ExpiryDuty(database.db, new Metrics(), 1000, 1);
    // A batch of one key per run: a full pass takes a run per key, then starts over.
    let removed = 0;
    for (let i = 0; i < 10; i++) removed += (await duty.runOnce()).staleKeys;
    expect(removed).toBe(1);
    expect(await keys()).toEqual(['gone']);
    expect((await client.get(held.body.id)).body.state).toBe('claimed');
  });
});
