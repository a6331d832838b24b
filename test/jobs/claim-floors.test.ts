import { sql } from 'kysely';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import type { BatonApp } from '../../src/app.js';
import { ClaimFloors } from '../../src/jobs/claim/floors.js';
import { ClaimFloorsDuty, claimFloorsOf } from '../../src/maintenance/claim-floors.js';
import { RingDuty } from '../../src/maintenance/ring.js';
import { Metrics } from '../../src/metrics/metrics.js';
import { createTestApp, useTestApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { api } from '../support/http.js';
import { drawIdsFrom as drawIds } from '../support/ring.js';

/**
 * Claim floors (src/jobs/claim/floors.ts, src/maintenance/claim-floors.ts, docs/adr/0013): while a
 * reader of baton.jobs keeps the ring from being truncated, the leader publishes where each queue's
 * first ready job is, and claims start there instead of stepping over every dead entry the reader
 * keeps. Every job is still handed out once and in order; a job made ready before a floor is claimed
 * once the leader's next pass has lowered it; floors reach the other replicas and lapse on their own.
 */
const database = useTestDatabase();
const app = useTestApp(database);
const silentLog = { warn() {}, info() {}, error() {} } as never;

const drawIdsFrom = (slot: number) => drawIds(database.db, slot);

type Claimed = { id: string; lease_token: string; priority: number };

async function claimAll(target: BatonApp, queue: string, n: number): Promise<Claimed[]> {
  const reply = await api(target).claim(queue, { max_jobs: n });
  expect(reply.status).toBe(200);
  return reply.body.jobs;
}

async function ackAll(jobs: Claimed[]) {
  if (jobs.length === 0) return;
  const reply = await api(app).ackBatch(jobs.map((j) => ({ id: j.id, lease_token: j.lease_token })));
  expect(reply.status).toBe(200);
}

/** A REPEATABLE READ transaction that counted the jobs and stays open: an analytics reader. */
async function openReader() {
  const reader = new pg.Client({ connectionString: database.url, application_name: 'report' });
  await reader.connect();
  await reader.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
  await reader.query('SELECT count(*) FROM baton.jobs');
  return {
    async end() {
      await reader.query('ROLLBACK');
      await reader.end();
    },
  };
}

/** The leader's two duties against this file's app: the ring (which sees it pinned) and the floors. */
function leaderDuties(publishTo: BatonApp = app) {
  const ring = new RingDuty(database.db, new Metrics(), silentLog, 500, {
    lockTimeoutMs: 50,
    carryAfterMs: 0,
    carryBatch: 1000,
  });
  const floors = new ClaimFloorsDuty(
    database.db,
    new Metrics(),
    () => ring.pinned,
    (f, ttl) => publishTo.wake.notifier.publishFloors(f, ttl),
    500,
  );
  return { ring, floors };
}

/** A reader pins the ring: a sealed slot emptied by acks cannot be truncated while it is open. */
async function pinTheRing(queue: string) {
  await drawIdsFrom(1);
  await api(app).enqueueBatch(queue, [{ payload: 'sealed' }]);
  await ackAll(await claimAll(app, queue, 1));
  await drawIdsFrom(2);
  const reader = await openReader();
  const duties = leaderDuties();
  expect((await duties.ring.runOnce()).blocked).toBeGreaterThanOrEqual(1);
  expect(duties.ring.pinned).toBe(true);
  return { reader, ...duties };
}

describe('claims from a floor while a reader pins the ring', () => {
  it('hands out every job once and in order, concurrent claims included, past the dead entries', async () => {
    const queue = 'floors-order';
    const pinned = await pinTheRing(queue);
    try {
      const enq = await api(app).enqueueBatch(
        queue,
        Array.from({ length: 400 }, (_, i) => ({ payload: i })),
      );
      const ids: string[] = enq.body.jobs.map((j: { id: string }) => j.id);
      // 150 claimed and acked under the reader: dead entries it keeps, before the first ready job.
      const first = await claimAll(app, queue, 150);
      await ackAll(first);

      expect((await pinned.floors.runOnce()).published).toBeGreaterThanOrEqual(1);
      const floor = app.wake.notifier.floors.get(queue)!;
      expect(floor.priority).toBe(0);
      const { rows } = await sql<{ below: boolean }>`
        SELECT ${floor.runAt}::timestamptz = run_at - interval '1 second' AS below
        FROM baton.jobs WHERE id = ${ids[150]!}`.execute(database.db);
      expect(rows[0]!.below).toBe(true);

      // Ten concurrent claims of 25: the other 250 jobs, each once, and together in claim order.
      const rest = (await Promise.all(Array.from({ length: 10 }, () => claimAll(app, queue, 25)))).flat();
      expect(rest.map((j) => j.id).sort()).toEqual(ids.slice(150).sort());
      expect(await claimAll(app, queue, 10)).toEqual([]);
      await ackAll(rest);
    } finally {
      await pinned.reader.end();
    }
  });

  it('claims a job made ready before the floor once the next pass has lowered it, ahead of the rest', async () => {
    const queue = 'floors-below';
    const pinned = await pinTheRing(queue);
    try {
      await api(app).enqueueBatch(
        queue,
        Array.from({ length: 20 }, (_, i) => ({ payload: i })),
      );
      await ackAll(await claimAll(app, queue, 10));
      await pinned.floors.runOnce();
      expect(app.wake.notifier.floors.get(queue)).toBeDefined();

      // Sorts before the floor: a higher priority, and a run_at an hour ago.
      const urgent = (await api(app).enqueue(queue, { payload: 'urgent', priority: 5 })).body.id;
      const late = (
        await api(app).enqueue(queue, {
          payload: 'late',
          run_at: new Date(Date.now() - 3_600_000).toISOString(),
        })
      ).body.id;
      const before = await claimAll(app, queue, 2);
      expect(before.map((j) => j.id)).not.toContain(urgent);
      expect(before.map((j) => j.id)).not.toContain(late);

      await pinned.floors.runOnce();
      const after = await claimAll(app, queue, 2);
      expect(after.map((j) => j.id)).toEqual([urgent, late]);
      await ackAll([...before, ...after, ...(await claimAll(app, queue, 20))]);
    } finally {
      await pinned.reader.end();
    }
  });

  it('gives an empty queue the floor (0, the walk less a second), so new jobs come after it', async () => {
    const queue = 'floors-empty';
    await api(app).enqueue(queue, { payload: 'make the queue' });
    await ackAll(await claimAll(app, queue, 1));
    const { rows } = await sql<{ now: string }>`SELECT now()::text AS now`.execute(database.db);
    const floor = (await claimFloorsOf(database.db))[queue]!;
    expect(floor.priority).toBe(0);
    const { rows: gap } = await sql<{ s: number }>`
      SELECT extract(epoch FROM ${rows[0]!.now}::timestamptz - ${floor.runAt}::timestamptz)::float8 AS s`.execute(
      database.db,
    );
    expect(gap[0]!.s).toBeGreaterThan(0.5);
    expect(gap[0]!.s).toBeLessThan(5);
    app.wake.notifier.publishFloors({ [queue]: floor }, 10_000);
    const id = (await api(app).enqueue(queue, { payload: 'new' })).body.id;
    expect((await claimAll(app, queue, 5)).map((j) => j.id)).toEqual([id]);
  });

  it('publishes nothing while the ring is not pinned, and leaves queues under flow control out', async () => {
    const { floors } = leaderDuties();
    expect(await floors.runOnce()).toEqual({ published: 0, walkMs: 0 });
    await api(app).call('PUT', '/v1/queues/floors-limited', { concurrency_limit: 2 });
    expect((await claimFloorsOf(database.db))['floors-limited']).toBeUndefined();
  });
});

describe('floors between replicas', () => {
  const others: BatonApp[] = [];
  afterAll(async () => {
    for (const other of others) await other.close();
  });

  it("reach another replica through NOTIFY, and that replica's claims start there", async () => {
    const other = await createTestApp(database);
    others.push(other);
    await expect.poll(() => other.wake.listener.connected).toBe(true);
    const queue = 'floors-replicas';
    const ids = (
      await api(app).enqueueBatch(
        queue,
        Array.from({ length: 3 }, (_, i) => ({ payload: i })),
      )
    ).body.jobs.map((j: { id: string }) => j.id);
    const { rows } = await sql<{ run_at: string }>`
      SELECT (run_at + interval '1 hour')::text AS run_at FROM baton.jobs WHERE id = ${ids[0]!}`.execute(
      database.db,
    );
    // A floor past every job of the queue: the other replica finds none while it lasts.
    app.wake.notifier.publishFloors({ [queue]: { priority: 0, runAt: rows[0]!.run_at } }, 1_500);
    await app.wake.notifier.flush();
    await expect.poll(() => other.wake.notifier.floors.get(queue)?.runAt).toBe(rows[0]!.run_at);
    expect(await claimAll(other, queue, 3)).toEqual([]);
    // It lapses: the claims go back to the head of the index.
    await expect.poll(() => other.wake.notifier.floors.get(queue), { timeout: 5_000 }).toBeUndefined();
    expect((await claimAll(other, queue, 3)).map((j) => j.id)).toEqual(ids);
  });
});

describe('ClaimFloors', () => {
  it('keeps a floor for its time, and a later walk replaces it', () => {
    const floors = new ClaimFloors();
    floors.set({ q: { priority: 1, runAt: 'a' } }, 1_000, 0);
    expect(floors.get('q', 999)).toEqual(expect.objectContaining({ priority: 1, runAt: 'a' }));
    floors.set({ q: { priority: 0, runAt: 'b' } }, 1_000, 500);
    expect(floors.get('q', 1_400)?.runAt).toBe('b');
    expect(floors.get('q', 1_500)).toBeUndefined();
    expect(floors.size).toBe(0);
  });
});
