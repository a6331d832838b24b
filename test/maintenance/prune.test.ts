import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { expireIdempotencyKeys } from '../../src/maintenance/expire-keys.js';
import { PruneDuty, pruneFinishedJobs } from '../../src/maintenance/prune.js';
import { Metrics } from '../../src/metrics/metrics.js';
import { useTestApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { api, enqueueAndClaim } from '../support/http.js';

const database = useTestDatabase();
const app = useTestApp(database);
const HOUR = 3600_000;
const DAY = 24 * HOUR;
const defaults = { completedRetentionMs: DAY, deadRetentionMs: 14 * DAY };
const opts = { batchSize: 1000, lockTimeoutMs: 50, defaults };

async function finish(queue: string, how: 'ack' | 'dead' | 'cancel', body: object = { payload: 1 }) {
  if (how === 'cancel') {
    const enq = await api(app).enqueue(queue, body);
    await api(app).cancel(enq.body.id);
    return enq.body.id as string;
  }
  const job = await enqueueAndClaim(app, queue, body);
  if (how === 'ack') await api(app).ack(job.id, { lease_token: job.lease_token });
  else await api(app).nack(job.id, { lease_token: job.lease_token, dead: true });
  return job.id;
}

const age = (ids: string[], ms: number) =>
  sql`UPDATE baton.job_history SET finished_at = now() - ${ms}::bigint * interval '1 millisecond'
      WHERE id = ANY(${ids}::bigint[])`.execute(database.db);

async function exists(id: string) {
  return (await api(app).get(id)).status === 200;
}

describe('prune', () => {
  it('removes finished jobs past retention and keeps the rest, per state', async () => {
    const oldDone = await finish('pr-basic', 'ack');
    const newDone = await finish('pr-basic', 'ack');
    const oldCancelled = await finish('pr-basic', 'cancel');
    const deadTwoDays = await finish('pr-basic', 'dead');
    const deadOld = await finish('pr-basic', 'dead');
    await age([oldDone, oldCancelled], DAY + HOUR);
    await age([deadTwoDays], 2 * DAY);
    await age([deadOld], 15 * DAY);
    const result = await pruneFinishedJobs(database.db, opts);
    expect(result).toEqual({ outcome: 'pruned', pruned: 3 });
    expect(await exists(oldDone)).toBe(false);
    expect(await exists(oldCancelled)).toBe(false);
    expect(await exists(deadOld)).toBe(false);
    expect(await exists(newDone)).toBe(true);
    expect(await exists(deadTwoDays)).toBe(true);
    expect(await pruneFinishedJobs(database.db, opts)).toEqual({ outcome: 'noop', pruned: 0 });
  });

  it('honours a queue’s own retention, and the defaults for a queue already collected', async () => {
    await database.db
      .insertInto('baton.queues')
      .values({ name: 'pr-short', auto_created: false, completed_retention_ms: '60000' })
      .execute();
    const shortLived = await finish('pr-short', 'ack');
    const orphan = await finish('pr-orphan', 'ack');
    await age([shortLived], 2 * 60_000);
    await age([orphan], DAY + HOUR);
    await database.db.deleteFrom('baton.queues').where('name', '=', 'pr-orphan').execute();
    await pruneFinishedJobs(database.db, opts);
    expect(await exists(shortLived)).toBe(false);
    expect(await exists(orphan)).toBe(false);
  });

  it('keeps a job while its idempotency key is live, and takes the key along when it goes', async () => {
    const keyed = await finish('pr-keyed', 'ack', { payload: 1, idempotency_key: 'k1' });
    await age([keyed], DAY + HOUR);
    await pruneFinishedJobs(database.db, opts);
    expect(await exists(keyed)).toBe(true);
    await sql`UPDATE baton.idempotency_keys SET expires_at = now() - interval '1 second' WHERE queue = 'pr-keyed'`.execute(
      database.db,
    );
    await pruneFinishedJobs(database.db, opts);
    expect(await exists(keyed)).toBe(false);
    const keys = await database.db
      .selectFrom('baton.idempotency_keys')
      .selectAll()
      .where('queue', '=', 'pr-keyed')
      .execute();
    expect(keys).toHaveLength(0);
  });

  it('works in bounded batches', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 7; i++) ids.push(await finish('pr-batch', 'ack'));
    await age(ids, DAY + HOUR);
    const first = await pruneFinishedJobs(database.db, { ...opts, batchSize: 5 });
    expect(first.pruned).toBe(5);
    const second = await pruneFinishedJobs(database.db, { ...opts, batchSize: 5 });
    expect(second.pruned).toBe(2);
  });

  for (const table of ['job_history', 'idempotency_keys']) {
    it(`meeting a lock on ${table} reports blocked, leaves nothing half-done, and succeeds once released`, async () => {
      const q = `pr-blocked-${table}`;
      const keyed = await finish(q, 'ack', { payload: 1, idempotency_key: 'gone' });
      const plain = await finish(q, 'ack');
      await sql`UPDATE baton.idempotency_keys SET expires_at = now() - interval '1 second' WHERE queue = ${q}`.execute(
        database.db,
      );
      await age([keyed, plain], DAY + HOUR);
      const metrics = new Metrics();
      const duty = new PruneDuty(database.db, metrics, 1000, { lockTimeoutMs: 50, defaults });
      const holder = await database.pool.connect();
      try {
        await holder.query('BEGIN');
        await holder.query(`LOCK TABLE baton.${table} IN SHARE MODE`);
        const blocked = await duty.runOnce();
        expect(blocked).toEqual({ outcome: 'blocked', pruned: 0 });
        // Backs off: 2 ticks after the first block.
        expect(duty.nextRunInMs(blocked)).toBe(2000);
      } finally {
        await holder.query('ROLLBACK');
        holder.release();
      }
      // Nothing was half-done: both jobs and the key are still there.
      expect(await exists(keyed)).toBe(true);
      expect(await exists(plain)).toBe(true);
      const keys = await database.db
        .selectFrom('baton.idempotency_keys')
        .select('key')
        .where('queue', '=', q)
        .execute();
      expect(keys).toHaveLength(1);

      const after = await duty.runOnce();
      expect(after.outcome).toBe('pruned');
      expect(await exists(keyed)).toBe(false);
      expect(await exists(plain)).toBe(false);
      const text = await metrics.registry.metrics();
      expect(text).toMatch(/baton_prune_total\{outcome="blocked"\} 1/);
      expect(text).toMatch(/baton_prune_total\{outcome="pruned"\} 1/);
    });
  }

  it('two prunes at once remove each job once, without errors', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 40; i++) ids.push(await finish('pr-two', 'ack'));
    await age(ids, DAY + HOUR);
    const results = await Promise.all(
      [1, 2].map(() => pruneFinishedJobs(database.db, { ...opts, batchSize: 1000 })),
    );
    const left = await database.db
      .selectFrom('baton.job_history')
      .select('id')
      .where('queue', '=', 'pr-two')
      .execute();
    expect(left).toHaveLength(0);
    expect(results.reduce((n, r) => n + r.pruned, 0)).toBeGreaterThanOrEqual(40);
  });
});

describe('idempotency key expiry', () => {
  it('removes expired keys and keeps live ones', async () => {
    await api(app).enqueue('ik-exp', { payload: 1, idempotency_key: 'old' });
    await api(app).enqueue('ik-exp', { payload: 1, idempotency_key: 'new' });
    await sql`UPDATE baton.idempotency_keys SET expires_at = now() - interval '1 second'
              WHERE queue = 'ik-exp' AND key = 'old'`.execute(database.db);
    expect(await expireIdempotencyKeys(database.db, 100)).toBe(1);
    const keys = await database.db
      .selectFrom('baton.idempotency_keys')
      .select('key')
      .where('queue', '=', 'ik-exp')
      .execute();
    expect(keys.map((k) => k.key)).toEqual(['new']);
  });
});
