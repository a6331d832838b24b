import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { expireIdempotencyKeys } from '../../src/maintenance/expire-keys.js';
import { HistoryPartitionsDuty } from '../../src/maintenance/history-partitions.js';
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

/** The day partition (`done_YYYYMMDD`) a completed job aged by `ms` finished in. */
async function dayOf(_id: string, ms: number) {
  const { rows } = await sql<{ day: string }>`
    SELECT to_char(date_trunc('day', now() - ${ms}::bigint * interval '1 millisecond', 'UTC'), 'YYYYMMDD') AS day`.execute(
    database.db,
  );
  return `done_${rows[0]!.day}`;
}

async function exists(id: string) {
  return (await api(app).get(id)).status === 200;
}

/** Everything the leader does to history in a pass: the day partitions, then row batches until noop. */
async function retire(batchSize = 1000) {
  const partitions = await new HistoryPartitionsDuty(
    database.db,
    new Metrics(),
    60_000,
    1000,
    opts,
  ).runOnce();
  let pruned = 0;
  for (;;) {
    const r = await pruneFinishedJobs(database.db, { ...opts, batchSize });
    if (r.outcome !== 'pruned') break;
    pruned += r.pruned;
  }
  return { partitions, pruned };
}

async function shortQueue(name: string, completedMs = 60_000, deadMs?: number) {
  await database.db
    .insertInto('baton.queues')
    .values({
      name,
      auto_created: false,
      completed_retention_ms: String(completedMs),
      ...(deadMs === undefined ? {} : { dead_retention_ms: String(deadMs) }),
    })
    .execute();
}

describe('prune', () => {
  it('removes finished jobs past retention and keeps the rest, per state', async () => {
    const oldDone = await finish('pr-basic', 'ack');
    const newDone = await finish('pr-basic', 'ack');
    const oldCancelled = await finish('pr-basic', 'cancel');
    const deadTwoDays = await finish('pr-basic', 'dead');
    const deadOld = await finish('pr-basic', 'dead');
    // Retention 1 day (completed, cancelled), 14 days (dead): a job goes at most a day after it.
    await age([oldDone, oldCancelled], 3 * DAY);
    await age([deadTwoDays], 2 * DAY);
    await age([deadOld], 16 * DAY);
    const { partitions } = await retire();
    expect(partitions.dropped.length).toBeGreaterThanOrEqual(2);
    expect(await exists(oldDone)).toBe(false);
    expect(await exists(oldCancelled)).toBe(false);
    expect(await exists(deadOld)).toBe(false);
    expect(await exists(newDone)).toBe(true);
    expect(await exists(deadTwoDays)).toBe(true);
    expect(await retire()).toMatchObject({ pruned: 0, partitions: { dropped: [] } });
  });

  it('honours each queue’s own retention: shorter ones row by row, a longer one holds its days', async () => {
    await shortQueue('pr-short');
    await shortQueue('pr-long', 10 * DAY);
    const shortLived = await finish('pr-short', 'ack');
    const shortFresh = await finish('pr-short', 'ack');
    const defaultOld = await finish('pr-default', 'ack');
    const longOld = await finish('pr-long', 'ack');
    const orphan = await finish('pr-orphan', 'ack');
    await age([shortLived], 2 * 60_000);
    await age([defaultOld, longOld], 4 * DAY);
    await age([orphan], 5 * DAY);
    await database.db.deleteFrom('baton.queues').where('name', '=', 'pr-orphan').execute();
    const { pruned } = await retire();
    // pr-short's (60 s) and the default queue's (1 day) in days held for pr-long's 10 days: row by row.
    expect(pruned).toBeGreaterThanOrEqual(2);
    expect(await exists(shortLived)).toBe(false);
    expect(await exists(defaultOld)).toBe(false);
    expect(await exists(orphan)).toBe(false);
    expect(await exists(shortFresh)).toBe(true);
    expect(await exists(longOld)).toBe(true);
    // pr-long's retention shortened: its day goes whole, read at prune time.
    await database.db
      .updateTable('baton.queues')
      .set({ completed_retention_ms: String(DAY) })
      .where('name', '=', 'pr-long')
      .execute();
    const again = await retire();
    expect(again.partitions.dropped).toContain(await dayOf(longOld, 4 * DAY));
    expect(await exists(longOld)).toBe(false);
  });

  it('keeps a job (and its day) while its idempotency key is live', async () => {
    const keyed = await finish('pr-keyed', 'ack', { payload: 1, idempotency_key: 'k1' });
    await age([keyed], 6 * DAY);
    const held = await retire();
    expect(held.partitions.kept).toBeGreaterThanOrEqual(1);
    expect(await exists(keyed)).toBe(true);
    await sql`UPDATE baton.idempotency_keys SET expires_at = now() - interval '1 second' WHERE queue = 'pr-keyed'`.execute(
      database.db,
    );
    await retire();
    expect(await exists(keyed)).toBe(false);
    // The expired key is the key expiry's, and an enqueue with it makes a new job meanwhile.
    expect(await expireIdempotencyKeys(database.db, 100)).toBeGreaterThanOrEqual(1);
    const again = await api(app).enqueue('pr-keyed', { payload: 2, idempotency_key: 'k1' });
    expect(again.status).toBe(201);
    expect(again.body.id).not.toBe(keyed);
  });

  it('row by row, keeps a job while its idempotency key is live, and takes the key along when it goes', async () => {
    await shortQueue('pr-keyed-rows');
    const keyed = await finish('pr-keyed-rows', 'ack', { payload: 1, idempotency_key: 'k1' });
    await age([keyed], 2 * 60_000);
    await pruneFinishedJobs(database.db, opts);
    expect(await exists(keyed)).toBe(true);
    await sql`UPDATE baton.idempotency_keys SET expires_at = now() - interval '1 second' WHERE queue = 'pr-keyed-rows'`.execute(
      database.db,
    );
    await pruneFinishedJobs(database.db, opts);
    expect(await exists(keyed)).toBe(false);
    const keys = await database.db
      .selectFrom('baton.idempotency_keys')
      .selectAll()
      .where('queue', '=', 'pr-keyed-rows')
      .execute();
    expect(keys).toHaveLength(0);
  });

  it('works in bounded batches', async () => {
    await shortQueue('pr-batch');
    const ids: string[] = [];
    for (let i = 0; i < 7; i++) ids.push(await finish('pr-batch', 'ack'));
    await age(ids, 2 * 60_000);
    const first = await pruneFinishedJobs(database.db, { ...opts, batchSize: 5 });
    expect(first.pruned).toBe(5);
    const second = await pruneFinishedJobs(database.db, { ...opts, batchSize: 5 });
    expect(second.pruned).toBe(2);
  });

  for (const table of ['job_history', 'idempotency_keys']) {
    it(`meeting a lock on ${table} reports blocked, leaves nothing half-done, and succeeds once released`, async () => {
      const q = `pr-blocked-${table}`;
      await shortQueue(q);
      const keyed = await finish(q, 'ack', { payload: 1, idempotency_key: 'gone' });
      const plain = await finish(q, 'ack');
      await sql`UPDATE baton.idempotency_keys SET expires_at = now() - interval '1 second' WHERE queue = ${q}`.execute(
        database.db,
      );
      await age([keyed, plain], 2 * 60_000);
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
    await shortQueue('pr-two');
    const ids: string[] = [];
    for (let i = 0; i < 40; i++) ids.push(await finish('pr-two', 'ack'));
    await age(ids, 2 * 60_000);
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
