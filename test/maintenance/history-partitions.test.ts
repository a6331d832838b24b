import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import {
  createHistoryPartitions,
  dayName,
  HISTORY_DAYS_AHEAD,
  HistoryPartitionsDuty,
  listHistoryPartitions,
} from '../../src/maintenance/history-partitions.js';
import { QueueStatsDuty, refreshFinishedStats } from '../../src/maintenance/queue-stats.js';
import { Metrics } from '../../src/metrics/metrics.js';
import { useTestApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { api, enqueueAndClaim } from '../support/http.js';

const database = useTestDatabase();
const app = useTestApp(database);
const DAY = 86_400_000;
const opts = { lockTimeoutMs: 50, defaults: { completedRetentionMs: DAY, deadRetentionMs: 14 * DAY } };
const duty = () => new HistoryPartitionsDuty(database.db, new Metrics(), 60_000, 1000, opts);

async function partitionNames() {
  return (await listHistoryPartitions(database.db)).map((p) => `${p.cls}_${p.day}`);
}

async function inDefault() {
  const { rows } = await sql<{ n: number }>`
    SELECT (SELECT count(*) FROM baton.job_history_done_default)::int
         + (SELECT count(*) FROM baton.job_history_dead_default)::int AS n`.execute(database.db);
  return rows[0]!.n;
}

async function ackedJob(queue: string) {
  const job = await enqueueAndClaim(app, queue);
  const res = await api(app).ack(job.id, { lease_token: job.lease_token });
  if (res.status !== 200) throw new Error(`ack: ${res.status} ${JSON.stringify(res.body)}`);
  return job.id;
}

describe('history partitions', () => {
  it('creates today’s and the next days’ partitions of both classes ahead, once', async () => {
    const first = await duty().runOnce();
    const second = await duty().runOnce();
    expect(second.created).toEqual([]);
    const { rows } = await sql<{ now: Date }>`SELECT now() AS now`.execute(database.db);
    const names = await partitionNames();
    for (let n = 0; n <= HISTORY_DAYS_AHEAD; n++) {
      const day = dayName(new Date(rows[0]!.now.getTime() + n * DAY));
      expect(names).toContain(`done_${day}`);
      expect(names).toContain(`dead_${day}`);
    }
    expect(first.blocked + second.blocked).toBe(0);
  });

  it('two leaders at once create each partition once, without errors', async () => {
    await sql`INSERT INTO baton.job_history (id, queue, state, priority, run_at, attempts, max_attempts, created_at, finished_at, payload)
              VALUES (nextval('baton.jobs_id_seq'), 'hp-two', 'completed', 0, now(), 1, 1, now(), now() + interval '20 days', '1')`.execute(
      database.db,
    );
    const results = await Promise.all([duty().runOnce(), duty().runOnce()]);
    const created = results.flatMap((r) => r.created);
    expect(new Set(created).size).toBe(created.length);
    // One of them may have met the other's advisory lock: it says blocked and the next pass does it.
    await duty().runOnce();
    expect(await inDefault()).toBe(0);
  });

  it('takes inserts at any time (the default partitions), and moves them into their day', async () => {
    const at = ['2001-02-03T04:05:06Z', '2099-12-31T23:59:59Z'];
    const ids: string[] = [];
    for (const [i, finishedAt] of at.entries()) {
      const { rows } = await sql<{ id: string }>`
        INSERT INTO baton.job_history (id, queue, state, priority, run_at, attempts, max_attempts, created_at,
                                       finished_at, dead_reason, payload)
        VALUES (nextval('baton.jobs_id_seq'), 'hp-any', ${i === 0 ? 'dead' : 'completed'}, 0, now(), 1, 1, now(),
                ${finishedAt}::timestamptz, ${i === 0 ? 'nacked_dead' : null}, '{"x": 1}')
        RETURNING id`.execute(database.db);
      ids.push(rows[0]!.id);
    }
    expect(await inDefault()).toBe(2);
    // A job acked now lands in today's partition, never in a default.
    const acked = await ackedJob('hp-any');
    expect(await inDefault()).toBe(2);

    // Keep the 2001 dead job for this test: its queue keeps dead jobs for a century.
    await database.db
      .updateTable('baton.queues')
      .set({ dead_retention_ms: String(100 * 365 * DAY) })
      .where('name', '=', 'hp-any')
      .execute();
    const result = await duty().runOnce();
    expect(result.moved).toBe(2);
    expect(result.created).toEqual(expect.arrayContaining(['dead_20010203', 'done_20991231']));
    expect(await inDefault()).toBe(0);
    for (const id of [...ids, acked]) expect([id, (await api(app).get(id)).status]).toEqual([id, 200]);
    expect(result.dropped).toEqual([]);
  });

  it('finished jobs still answer by id, in lists and in the queue’s counts', async () => {
    const ids = [await ackedJob('hp-read'), await ackedJob('hp-read')];
    const dead = await enqueueAndClaim(app, 'hp-read');
    await api(app).nack(dead.id, { lease_token: dead.lease_token, dead: true });
    const got = await api(app).get(ids[0]!);
    expect(got.body).toMatchObject({ id: ids[0], state: 'completed' });
    const list = await api(app).call('GET', '/v1/queues/hp-read/jobs?state=completed');
    expect(list.status).toBe(200);
    expect(list.body.jobs.map((j: { id: string }) => j.id).sort()).toEqual([...ids].sort());
    const deadList = await api(app).call('GET', '/v1/queues/hp-read/jobs?state=dead');
    expect(deadList.body.jobs.map((j: { id: string }) => j.id)).toEqual([dead.id]);
    await new QueueStatsDuty(database.db, 1000).runOnce();
    await refreshFinishedStats(database.db, { queues: ['hp-read'] });
    const { rows } = await sql<{ completed: string; dead: string }>`
      SELECT completed, dead FROM baton.queue_stats WHERE queue = 'hp-read'`.execute(database.db);
    expect(rows[0]).toMatchObject({ completed: '2', dead: '1' });
  });

  it('drops a day while acks insert into history, losing no row and failing no ack', async () => {
    // A day four days back, full of jobs past retention.
    const old: string[] = [];
    for (let i = 0; i < 20; i++) old.push(await ackedJob('hp-race-old'));
    await sql`UPDATE baton.job_history SET finished_at = now() - interval '4 days' WHERE queue = 'hp-race-old'`.execute(
      database.db,
    );
    // Its day partition is made (the rows move in from the default), not dropped yet.
    await createHistoryPartitions(database.db, opts);
    const target = `done_${dayName(new Date(Date.now() - 4 * DAY))}`;
    expect(await partitionNames()).toContain(target);

    const queue = 'hp-race';
    const enq = await api(app).enqueueBatch(
      queue,
      Array.from({ length: 200 }, (_, i) => ({ payload: i })),
    );
    expect(enq.status).toBe(201);
    const statuses: number[] = [];
    let dropping = true;
    const drops: string[] = [];
    // Meanwhile the leader keeps creating (ATTACH) and dropping (TRUNCATE, DROP) days: each pass
    // finds one more past day in the default partition, makes its partition and empties it.
    const dropper = (async () => {
      for (let i = 5; dropping; i++) {
        await sql`INSERT INTO baton.job_history (id, queue, state, priority, run_at, attempts, max_attempts, created_at, finished_at, payload)
                  VALUES (nextval('baton.jobs_id_seq'), 'hp-race-old', 'completed', 0, now(), 1, 1, now(),
                          now() - ${i}::integer * interval '1 day', '1')`.execute(database.db);
        const r = await duty().runOnce();
        drops.push(...r.dropped);
      }
    })();
    const workers = Array.from({ length: 8 }, async () => {
      for (;;) {
        const claimed = await api(app).claim(queue, { max_jobs: 1 });
        const job = claimed.body.jobs?.[0];
        if (!job) return;
        statuses.push((await api(app).ack(job.id, { lease_token: job.lease_token })).status);
      }
    });
    await Promise.all(workers);
    dropping = false;
    await dropper;
    while (!drops.includes(target)) {
      const r = await duty().runOnce();
      drops.push(...r.dropped);
    }
    expect(drops.length).toBeGreaterThan(2);
    expect(statuses).toHaveLength(200);
    expect(statuses.every((s) => s === 200)).toBe(true);
    const { rows } = await sql<{ n: number }>`
      SELECT count(*)::int AS n FROM baton.job_history WHERE queue = ${queue} AND state = 'completed'`.execute(
      database.db,
    );
    expect(rows[0]!.n).toBe(200);
    expect(await partitionNames()).not.toContain(target);
    for (const id of old.slice(0, 3)) expect((await api(app).get(id)).status).toBe(404);
  });
});
