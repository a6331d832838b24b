import { sql } from 'kysely';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { IDS_PER_SLOT, RING_SLOTS } from '../../src/jobs/ring.js';
import { maintainRing, RingDuty, type RingOptions } from '../../src/maintenance/ring.js';
import { Metrics } from '../../src/metrics/metrics.js';
import { useTestApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { api } from '../support/http.js';
import { drawIdsFrom as drawIds } from '../support/ring.js';

/**
 * The ring of live jobs (src/jobs/ring.ts, src/maintenance/ring.ts): sealed slots are emptied with
 * TRUNCATE, whatever transaction holds vacuum back; long-running claimed jobs are carried forward
 * and stay theirs; a truncation waiting for a lock gives up (blocked) and nothing is ever lost.
 */
const database = useTestDatabase();
const app = useTestApp(database);

const OPTS: RingOptions = { lockTimeoutMs: 50, carryAfterMs: 0, carryBatch: 1000 };

const drawIdsFrom = (slot: number) => drawIds(database.db, slot);

const slotOf = async (id: string) =>
  (await sql<{ slot: number }>`SELECT slot FROM baton.jobs WHERE id = ${id}`.execute(database.db)).rows[0]
    ?.slot;

const pages = async (slot: number) =>
  Number(
    (
      await sql<{
        size: string;
      }>`SELECT pg_relation_size(${`baton.jobs_${slot}`}::regclass)::text AS size`.execute(database.db)
    ).rows[0]!.size,
  );

describe('the ring of live jobs', () => {
  it('truncates a sealed slot once its jobs are done, and leaves the current one', async () => {
    await drawIdsFrom(2);
    await api(app).enqueueBatch(
      'ring-basic',
      Array.from({ length: 50 }, (_, i) => ({ payload: i })),
    );
    const jobs = (await api(app).claim('ring-basic', { max_jobs: 50 })).body.jobs;
    await api(app).ackBatch(
      jobs.map((j: { id: string; lease_token: string }) => ({ id: j.id, lease_token: j.lease_token })),
    );
    expect(await pages(2)).toBeGreaterThan(0);

    // Still the current slot: kept.
    expect((await maintainRing(database.db, OPTS)).truncated).not.toContain(2);
    expect(await pages(2)).toBeGreaterThan(0);

    await drawIdsFrom(3);
    const pass = await maintainRing(database.db, OPTS);
    expect(pass.current).toBe(3);
    expect(pass.truncated).toContain(2);
    expect(await pages(2)).toBe(0);
  });

  it('leaves a sealed slot with ready jobs to the claims (a backlog), then empties it', async () => {
    await drawIdsFrom(4);
    const enq = await api(app).enqueueBatch(
      'ring-backlog',
      Array.from({ length: 5 }, (_, i) => ({ payload: i })),
    );
    await drawIdsFrom(5);
    const pass = await maintainRing(database.db, OPTS);
    expect(pass.truncated).not.toContain(4);
    expect(pass.busy).toBeGreaterThan(0);
    const claimed = (await api(app).claim('ring-backlog', { max_jobs: 5 })).body.jobs;
    expect(claimed.map((j: { id: string }) => j.id).sort()).toEqual(
      enq.body.jobs.map((j: { id: string }) => j.id).sort(),
    );
    for (const j of claimed) await api(app).ack(j.id, { lease_token: j.lease_token });
    expect((await maintainRing(database.db, OPTS)).truncated).toContain(4);
  });

  it('carries a long-running claimed job to the current slot; its worker renews, acks and reads it as before', async () => {
    await drawIdsFrom(6);
    const enq = await api(app).enqueue('ring-carry', { payload: 'long' });
    const [job] = (await api(app).claim('ring-carry', { lease_ms: 60_000 })).body.jobs;
    await drawIdsFrom(7);
    const pass = await maintainRing(database.db, OPTS);
    expect(pass.carried).toBeGreaterThanOrEqual(1);
    expect(pass.truncated).toContain(6);
    expect(await slotOf(job.id)).toBe(7);

    expect((await api(app).renew(job.id, { lease_token: job.lease_token })).status).toBe(200);
    expect((await api(app).get(job.id)).body).toMatchObject({ id: enq.body.id, state: 'claimed' });
    const ack = await api(app).ack(job.id, { lease_token: job.lease_token, result: 'done' });
    expect(ack.status).toBe(200);
    expect(ack.body).toMatchObject({ state: 'completed', result: 'done' });
  });

  it('a nack of a carried job, and a job carried while its ack waited for the row, still work', async () => {
    await drawIdsFrom(0);
    await api(app).enqueueBatch('ring-race', [{ payload: 1 }, { payload: 2 }]);
    const [a, b] = (await api(app).claim('ring-race', { max_jobs: 2 })).body.jobs;
    await drawIdsFrom(1);
    await maintainRing(database.db, OPTS);
    const nack = await api(app).nack(a.id, { lease_token: a.lease_token, retry_in_ms: 0 });
    expect(nack.status).toBe(200);
    expect(nack.body.state).toBe('ready');

    // The leader carries `b` (from slot 1 to slot 2) while b's ack waits for the row: the ack meets
    // "tuple already moved to another partition" (40001), runs again and finds it.
    await drawIdsFrom(2);
    const carrier = new pg.Client({ connectionString: database.url });
    await carrier.connect();
    try {
      await carrier.query('BEGIN');
      await carrier.query(`UPDATE baton.jobs SET slot = 2 WHERE id = $1`, [b.id]);
      const ack = api(app).ack(b.id, { lease_token: b.lease_token });
      await new Promise((r) => setTimeout(r, 200));
      await carrier.query('COMMIT');
      const answer = await ack;
      expect(answer.status, JSON.stringify(answer.body)).toBe(200);
      expect(answer.body.state).toBe('completed');
    } finally {
      await carrier.end();
    }
  });

  it('a truncation that cannot get its lock is blocked, rolled back, and done on a later pass', async () => {
    await drawIdsFrom(3);
    const enq = await api(app).enqueue('ring-lock', { payload: 1 });
    const [job] = (await api(app).claim('ring-lock')).body.jobs;
    await api(app).ack(job.id, { lease_token: job.lease_token });
    await drawIdsFrom(4);
    const reader = new pg.Client({ connectionString: database.url });
    await reader.connect();
    try {
      // A long report reads the partition inside a transaction and keeps its ACCESS SHARE lock.
      await reader.query('BEGIN');
      await reader.query('SELECT count(*) FROM baton.jobs_3');
      const blocked = await maintainRing(database.db, OPTS);
      expect(blocked.blocked).toBeGreaterThanOrEqual(1);
      expect(blocked.truncated).not.toContain(3);
      // Claims and enqueues carry on meanwhile.
      expect((await api(app).enqueue('ring-lock', { payload: 2 })).status).toBe(201);
      expect((await api(app).claim('ring-lock')).body.jobs).toHaveLength(1);
    } finally {
      await reader.query('ROLLBACK');
      await reader.end();
    }
    expect((await api(app).get(enq.body.id)).body.state).toBe('completed');
    expect((await maintainRing(database.db, OPTS)).truncated).toContain(3);
  });

  it('does not queue a truncation behind a transaction open a while: the slot is blocked at once', async () => {
    await drawIdsFrom(5);
    const enq = await api(app).enqueue('ring-held', { payload: 1 });
    const [claimed] = (await api(app).claim('ring-held')).body.jobs;
    await api(app).ack(claimed.id, { lease_token: claimed.lease_token });
    await drawIdsFrom(6);
    const reader = new pg.Client({ connectionString: database.url });
    await reader.connect();
    try {
      await reader.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
      await reader.query('SELECT count(*) FROM baton.jobs');
      await new Promise((r) => setTimeout(r, 1_200));
      // With a lock timeout of a minute, a LOCK TABLE here would wait for the reader (and every claim
      // of the slot would wait behind it): the pass answers blocked without asking for the lock.
      const pass = await maintainRing(database.db, { ...OPTS, lockTimeoutMs: 60_000 });
      expect(pass.blocked).toBeGreaterThanOrEqual(1);
      expect(pass.truncated).not.toContain(5);
    } finally {
      await reader.query('ROLLBACK');
      await reader.end();
    }
    expect((await api(app).get(enq.body.id)).body.state).toBe('completed');
    expect((await maintainRing(database.db, OPTS)).truncated).toContain(5);
  }, 20_000);

  it('names the open transactions that keep it from truncating, once a minute', async () => {
    await drawIdsFrom(1);
    await api(app).enqueue('ring-report', { payload: 1 });
    const [claimed] = (await api(app).claim('ring-report')).body.jobs;
    await api(app).ack(claimed.id, { lease_token: claimed.lease_token });
    await drawIdsFrom(2);
    const warnings: { obj: any; msg: string }[] = [];
    const log = { info() {}, error() {}, warn: (obj: object, msg: string) => warnings.push({ obj, msg }) };
    const duty = new RingDuty(database.db, new Metrics(), log, 500, { ...OPTS, holdersOlderThanMs: 0 });
    const reader = new pg.Client({ connectionString: database.url, application_name: 'nightly-report' });
    await reader.connect();
    try {
      // An analytics reader: a REPEATABLE READ transaction that counted the jobs and stays open.
      await reader.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
      await reader.query('SELECT count(*) FROM baton.jobs');
      const pid = (await reader.query('SELECT pg_backend_pid() AS pid')).rows[0].pid;
      expect((await duty.runOnce()).blocked).toBeGreaterThanOrEqual(1);
      expect(warnings).toHaveLength(1);
      expect(warnings[0]!.msg).toMatch(/cannot be truncated/);
      expect(warnings[0]!.obj.holders).toContainEqual(
        expect.objectContaining({ pid, application_name: 'nightly-report' }),
      );
      // Blocked again at once: counted, not logged again within the minute.
      await duty.runOnce();
      expect(warnings).toHaveLength(1);
    } finally {
      await reader.query('ROLLBACK');
      await reader.end();
    }
    // The reader gone, nothing is blocked any more.
    expect((await duty.runOnce()).blocked).toBe(0);
  });

  it('never truncates a job inserted into a sealed slot by a transaction that commits meanwhile', async () => {
    await drawIdsFrom(5);
    await drawIdsFrom(6);
    const producer = new pg.Client({ connectionString: database.url });
    await producer.connect();
    try {
      // A slow enqueue drew an id of slot 5 and has not committed yet when the leader comes.
      await producer.query('BEGIN');
      await producer.query(`INSERT INTO baton.queues (name, auto_created) VALUES ('ring-slow', false)
                            ON CONFLICT DO NOTHING`);
      await producer.query(`
        INSERT INTO baton.jobs (slot, id, queue, state, run_at, max_attempts, payload)
        VALUES (5, ${6 * IDS_PER_SLOT * RING_SLOTS + 5 * IDS_PER_SLOT + 7}, 'ring-slow', 'ready', now(), 5, '"slow"')`);
      const during = await maintainRing(database.db, OPTS);
      expect(during.truncated).not.toContain(5);
      await producer.query('COMMIT');
    } finally {
      await producer.end();
    }
    expect((await maintainRing(database.db, OPTS)).truncated).not.toContain(5);
    const [job] = (await api(app).claim('ring-slow')).body.jobs;
    expect(job.payload).toBe('slow');
  });

  it('empties slots while a transaction holds vacuum back: the space claims read stays bounded', async () => {
    const holder = new pg.Client({ connectionString: database.url });
    await holder.connect();
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT txid_current()');
      const q = 'ring-horizon';
      for (let round = 0; round < 6; round++) {
        await drawIdsFrom(round % RING_SLOTS);
        await api(app).enqueueBatch(
          q,
          Array.from({ length: 500 }, (_, i) => ({ payload: i })),
        );
        const jobs = (await api(app).claim(q, { max_jobs: 500 })).body.jobs;
        await api(app).ackBatch(
          jobs.map((j: { id: string; lease_token: string }) => ({ id: j.id, lease_token: j.lease_token })),
        );
        await maintainRing(database.db, OPTS);
      }
      // Dead rows of five sealed slots could not be vacuumed (the horizon is held), yet those slots
      // are empty: only the current slot, and slots still holding live jobs of earlier tests, have pages.
      const live = await sql<{ slot: number }>`SELECT DISTINCT slot FROM baton.jobs`.execute(database.db);
      const sizes = await Promise.all(Array.from({ length: RING_SLOTS }, (_, s) => pages(s)));
      const holding = sizes.flatMap((size, s) => (size > 0 ? [s] : []));
      expect(holding.sort()).toEqual([...new Set([5, ...live.rows.map((r) => r.slot)])].sort());
      expect(holding.length).toBeLessThan(4);
    } finally {
      await holder.query('ROLLBACK');
      await holder.end();
    }
  });
});

describe('the ring under concurrent traffic', () => {
  it('rotation, carries and truncations racing claims, renewals, acks and re-arm lose and repeat nothing', async () => {
    const q = 'ring-race-all';
    const JOBS = 3000;
    let stop = false;
    const failures: string[] = [];
    const acked = new Map<string, number>();

    // Paced by the workers and the leader: a batch waits until the one before the last is acked
    // (so no slot piles up a backlog, which the leader leaves alone until drained) and for two
    // leader passes (each moves ids on, so every batch goes into a slot of its own). Each slot is
    // then sealed, carried and truncated while the traffic runs, however fast or loaded the
    // machine. (Pacing by a number of truncations instead could wait for ever: once the traffic
    // waits, nothing is left to truncate.)
    const producer = async () => {
      for (let sent = 0; sent < JOBS; sent += 100) {
        const after = ring.passes + 2;
        const wait = () => !stop && (acked.size < sent - 100 || ring.passes < after);
        while (wait()) await new Promise((r) => setTimeout(r, 5));
        const res = await api(app).enqueueBatch(
          q,
          Array.from({ length: 100 }, (_, i) => ({ payload: sent + i })),
        );
        if (res.status !== 201) failures.push(`enqueue ${res.status}`);
      }
    };
    const worker = async (n: number) => {
      while (!stop) {
        const res = await api(app).claim(q, { max_jobs: 20, lease_ms: 60_000, worker_id: `w${n}` });
        if (res.status !== 200) failures.push(`claim ${res.status} ${JSON.stringify(res.body)}`);
        const jobs: { id: string; lease_token: string }[] = res.body.jobs ?? [];
        if (jobs.length === 0) {
          await new Promise((r) => setTimeout(r, 5));
          continue;
        }
        // Hold some jobs a while, renewing, so that the leader carries them mid-flight.
        if (n % 2 === 0) {
          await new Promise((r) => setTimeout(r, 30));
          const renew = await api(app).renewBatch(
            jobs.map((j) => ({ id: j.id, lease_token: j.lease_token })),
          );
          for (const r of renew.body.results ?? [])
            if (r.outcome !== 'renewed') failures.push(`renew ${r.outcome}`);
        }
        const half = Math.ceil(jobs.length / 2);
        for (const j of jobs.slice(0, half)) {
          const ack = await api(app).ack(j.id, { lease_token: j.lease_token });
          if (ack.status !== 200) failures.push(`ack ${ack.status} ${JSON.stringify(ack.body)}`);
          else acked.set(j.id, (acked.get(j.id) ?? 0) + 1);
        }
        const batch = await api(app).ackBatch(
          jobs.slice(half).map((j) => ({ id: j.id, lease_token: j.lease_token })),
        );
        for (const r of batch.body.results ?? []) {
          if (r.outcome !== 'acked') failures.push(`batch ack ${r.outcome}`);
          else acked.set(r.id, (acked.get(r.id) ?? 0) + 1);
        }
      }
    };
    const ring = { carried: 0, truncated: 0, passes: 0 };
    const leader = async () => {
      let slot = 0;
      while (!stop) {
        // Move the current slot on faster than the ids would, so that every slot is sealed, carried
        // and truncated many times during the run.
        try {
          await drawIdsFrom(++slot % RING_SLOTS);
          const pass = await maintainRing(database.db, { ...OPTS, carryAfterMs: 0 });
          ring.carried += pass.carried;
          ring.truncated += pass.truncated.length;
          ring.passes++;
        } catch (err) {
          failures.push(`ring pass: ${err}`);
          stop = true;
        }
        await new Promise((r) => setTimeout(r, 15));
      }
    };

    const workers = Array.from({ length: 4 }, (_, n) => worker(n));
    const running = leader();
    await producer();
    while (acked.size < JOBS && failures.length === 0) await new Promise((r) => setTimeout(r, 50));
    stop = true;
    await Promise.all([...workers, running]);

    expect(failures).toEqual([]);
    expect(ring.carried).toBeGreaterThan(0);
    expect(ring.truncated).toBeGreaterThan(10);
    expect(acked.size).toBe(JOBS);
    expect([...acked.values()].every((n) => n === 1)).toBe(true);
    const { rows } = await sql<{ done: number; distinct_payloads: number; live: number }>`
      SELECT (SELECT count(*)::int FROM baton.job_history WHERE queue = ${q} AND state = 'completed') AS done,
             (SELECT count(DISTINCT payload)::int FROM baton.job_history WHERE queue = ${q}) AS distinct_payloads,
             (SELECT count(*)::int FROM baton.jobs WHERE queue = ${q}) AS live`.execute(database.db);
    expect(rows[0]).toEqual({ done: JOBS, distinct_payloads: JOBS, live: 0 });
  }, 120_000);
});
