import { sql } from 'kysely';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { BatonApp } from '../../src/app.js';
import { noLog } from '../../src/logger.js';
import { SchedulesDuty } from '../../src/maintenance/schedules.js';
import { Metrics } from '../../src/metrics/metrics.js';
import { type FireOptions, fireDueSchedules } from '../../src/schedules/fire.js';
import { createTestApp, useTestApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { api } from '../support/http.js';
import { metricValue } from '../support/prometheus.js';
import { until } from '../support/until.js';

const database = useTestDatabase();
const app = useTestApp(database);

const options = (over: Partial<FireOptions> = {}): FireOptions => ({
  enqueue: { autoCreate: { enabled: true, maxQueues: 100 }, defaultMaxAttempts: 5 },
  graceMs: 60_000,
  batch: 100,
  ...over,
});
const put = (name: string, body: object) => api(app).call('PUT', `/v1/schedules/${name}`, body);
const getSchedule = async (name: string) => (await api(app).call('GET', `/v1/schedules/${name}`)).body;

/** Make a schedule owe the occurrence `minutesAgo` minutes back (every-minute crons only). */
const owe = (name: string, minutesAgo: number) =>
  sql`UPDATE baton.schedules SET next_run_at = date_trunc('minute', now()) - ${minutesAgo} * interval '1 minute'
      WHERE name = ${name}`.execute(database.db);

const jobsOf = async (queue: string) =>
  (
    await sql<{
      id: string;
      run_at: Date;
      idempotency_key: string;
      state: string;
      payload: unknown;
      priority: number;
    }>`
      SELECT id, run_at, idempotency_key, state, payload, priority FROM baton.jobs WHERE queue = ${queue}
      UNION ALL
      SELECT id, run_at, idempotency_key, state, payload, priority FROM baton.job_history WHERE queue = ${queue}
      ORDER BY run_at, id`.execute(database.db)
  ).rows;

/** Owe occurrences from a fixed time, and run the duty at a fixed database time after it. */
const oweFrom = (name: string, iso: string) =>
  sql`UPDATE baton.schedules SET next_run_at = ${iso}::timestamptz WHERE name = ${name}`.execute(database.db);
const at = (iso: string, over: Partial<FireOptions> = {}) => options({ now: new Date(iso), ...over });

describe('the schedules duty', () => {
  // Each test's schedules are its own: none left behind to come due in the middle of the next.
  afterEach(async () => {
    await sql`DELETE FROM baton.schedules`.execute(database.db);
  });

  it('enqueues a due occurrence once, as a ready job at the occurrence, and moves the schedule on', async () => {
    const body =
      '{"queue": "s-once", "cron": "* * * * *", "payload": {"n": 9007199254740993}, "priority": 3}';
    const created = await app.inject({
      method: 'PUT',
      url: '/v1/schedules/once',
      headers: { 'content-type': 'application/json' },
      payload: body,
    });
    expect(created.statusCode).toBe(201);
    await owe('once', 0);
    const due = (await getSchedule('once')).next_run_at;
    const first = await fireDueSchedules(database.db, options());
    expect(first.outcomes).toEqual([{ queue: 's-once', outcome: 'enqueued', n: 1 }]);
    const jobs = await jobsOf('s-once');
    expect(jobs).toHaveLength(1);
    expect(jobs[0]).toMatchObject({ state: 'ready', priority: 3, idempotency_key: `schedule:once:${due}` });
    expect(jobs[0]!.run_at.toISOString()).toBe(due);
    // The payload's number comes through exactly, as for any enqueue.
    expect((await app.inject({ method: 'GET', url: `/v1/jobs/${jobs[0]!.id}` })).body).toContain(
      '"payload":{"n":9007199254740993}',
    );
    const after = await getSchedule('once');
    expect(after).toMatchObject({ last_run_at: due, last_job_id: jobs[0]!.id, last_error: null });
    expect(Date.parse(after.next_run_at)).toBe(Date.parse(due) + 60_000);
    // Nothing is due any more: a second run does nothing.
    expect((await fireDueSchedules(database.db, options())).schedules).toBe(0);
    expect(await jobsOf('s-once')).toHaveLength(1);
  });

  it('catch_up after 10 missed minutes: none runs nothing (past the grace), latest one job, all ten', async () => {
    for (const catchUp of ['none', 'latest', 'all']) {
      await put(`cu-${catchUp}`, { queue: `s-cu-${catchUp}`, cron: '* * * * *', catch_up: catchUp });
      await oweFrom(`cu-${catchUp}`, '2026-01-01T08:00:00Z');
    }
    // 08:00 to 08:09 are due; the latest is 30 s old, past a 10 s grace.
    const run = await fireDueSchedules(database.db, at('2026-01-01T08:09:30Z', { graceMs: 10_000 }));
    const count = (queue: string, outcome: string) =>
      run.outcomes.filter((o) => o.queue === queue && o.outcome === outcome).reduce((a, o) => a + o.n, 0);
    expect(await jobsOf('s-cu-none')).toHaveLength(0);
    expect(count('s-cu-none', 'missed')).toBe(10);
    const latest = await jobsOf('s-cu-latest');
    expect(latest.map((j) => j.run_at.toISOString())).toEqual(['2026-01-01T08:09:00.000Z']);
    expect(count('s-cu-latest', 'coalesced')).toBe(9);
    const all = await jobsOf('s-cu-all');
    expect(all).toHaveLength(10);
    expect(all[0]!.run_at.toISOString()).toBe('2026-01-01T08:00:00.000Z');
    // Each schedule now waits for the next minute after that time.
    for (const catchUp of ['none', 'latest', 'all']) {
      expect((await getSchedule(`cu-${catchUp}`)).next_run_at).toBe('2026-01-01T08:10:00.000Z');
    }
    // Within the grace, catch_up none runs the latest occurrence.
    await oweFrom('cu-none', '2026-01-01T08:10:00Z');
    await fireDueSchedules(database.db, at('2026-01-01T08:10:05Z', { graceMs: 10_000 }));
    expect(await jobsOf('s-cu-none')).toHaveLength(1);
  });

  it('overlap skip: no new job while the last one is scheduled, ready or claimed; again once it is done', async () => {
    await put('ov', { queue: 's-ov', cron: '* * * * *', overlap: 'skip' });
    await oweFrom('ov', '2026-01-01T08:00:00Z');
    await fireDueSchedules(database.db, at('2026-01-01T08:00:00.500Z'));
    const [job] = await jobsOf('s-ov');
    for (const [step, minute] of [
      ['ready', '01'],
      ['claimed', '02'],
    ] as const) {
      if (step === 'claimed') await api(app).claim('s-ov');
      const run = await fireDueSchedules(database.db, at(`2026-01-01T08:${minute}:00.500Z`));
      expect(run.outcomes, step).toEqual([{ queue: 's-ov', outcome: 'skipped', n: 1 }]);
      expect(await jobsOf('s-ov'), step).toHaveLength(1);
    }
    expect((await api(app).get(job!.id)).body.state).toBe('claimed');
    await api(app).cancel(job!.id);
    const run = await fireDueSchedules(database.db, at('2026-01-01T08:03:00.500Z'));
    expect(run.outcomes).toEqual([{ queue: 's-ov', outcome: 'enqueued', n: 1 }]);
    expect(await jobsOf('s-ov')).toHaveLength(2);
  });

  it('an occurrence handed out again (its schedule set back by hand) is found by its idempotency key, not enqueued twice', async () => {
    await put('again', { queue: 's-again', cron: '* * * * *' });
    await oweFrom('again', '2026-01-01T08:00:00Z');
    await fireDueSchedules(database.db, at('2026-01-01T08:00:00.500Z'));
    await oweFrom('again', '2026-01-01T08:00:00Z');
    const run = await fireDueSchedules(database.db, at('2026-01-01T08:00:00.500Z'));
    expect(run.outcomes).toEqual([{ queue: 's-again', outcome: 'duplicate', n: 1 }]);
    expect(await jobsOf('s-again')).toHaveLength(1);
  });

  it('a paused schedule enqueues nothing; resumed, it waits for its next occurrence after now', async () => {
    await put('pz', { queue: 's-pz', cron: '* * * * *' });
    await api(app).call('POST', '/v1/schedules/pz/pause');
    await owe('pz', 3);
    expect((await getSchedule('pz')).next_run_at).toBeNull();
    await fireDueSchedules(database.db, options());
    expect(await jobsOf('s-pz')).toHaveLength(0);
    const resumed = (await api(app).call('POST', '/v1/schedules/pz/resume')).body;
    expect(Date.parse(resumed.next_run_at)).toBeGreaterThan(Date.now() - 1000);
    await fireDueSchedules(database.db, options());
    expect(await jobsOf('s-pz')).toHaveLength(0);
  });

  it('30 2 * * * in Europe/Berlin on the daylight-saving days, by a given database time', async () => {
    await put('dst', { queue: 's-dst', cron: '30 2 * * *', timezone: 'Europe/Berlin' });
    const at = (iso: string) => options({ now: new Date(iso) });
    const setNext = (iso: string) =>
      sql`UPDATE baton.schedules SET next_run_at = ${iso}::timestamptz WHERE name = 'dst'`.execute(
        database.db,
      );
    // Spring forward: the gap swallows 02:30, so the occurrence is 03:00 CEST (01:00 UTC), once.
    await setNext('2026-03-29T01:00:00Z');
    expect((await fireDueSchedules(database.db, at('2026-03-29T00:59:59.500Z'))).schedules).toBe(0);
    await fireDueSchedules(database.db, at('2026-03-29T01:00:00.200Z'));
    expect((await getSchedule('dst')).next_run_at).toBe('2026-03-30T00:30:00.000Z');
    // Fall back: 02:30 happens twice; one job, at the first (00:30 UTC), none at the second (01:30 UTC).
    await setNext('2026-10-25T00:30:00Z');
    await fireDueSchedules(database.db, at('2026-10-25T00:30:00.200Z'));
    expect((await getSchedule('dst')).next_run_at).toBe('2026-10-26T01:30:00.000Z');
    expect((await fireDueSchedules(database.db, at('2026-10-25T01:30:00.200Z'))).schedules).toBe(0);
    expect((await jobsOf('s-dst')).map((j) => j.run_at.toISOString())).toEqual([
      '2026-03-29T01:00:00.000Z',
      '2026-10-25T00:30:00.000Z',
    ]);
  });

  it('a queue that cannot take the job fails that schedule alone: recorded, moved on, the rest enqueued', async () => {
    await put('fail-a', { queue: 's-fail-missing', cron: '* * * * *' });
    await put('fail-b', { queue: 's-fail-ok', cron: '* * * * *' });
    await api(app).call('PUT', '/v1/queues/s-fail-ok', {});
    await owe('fail-a', 0);
    await owe('fail-b', 0);
    const run = await fireDueSchedules(
      database.db,
      options({ enqueue: { autoCreate: { enabled: false, maxQueues: 100 }, defaultMaxAttempts: 5 } }),
    );
    expect(run.outcomes).toEqual(
      expect.arrayContaining([
        { queue: 's-fail-missing', outcome: 'failed', n: 1 },
        { queue: 's-fail-ok', outcome: 'enqueued', n: 1 },
      ]),
    );
    const failed = await getSchedule('fail-a');
    expect(failed.last_error.message).toMatch(/queue "s-fail-missing" does not exist/);
    expect(Date.parse(failed.next_run_at)).toBeGreaterThan(Date.now() - 1000);
    expect(await jobsOf('s-fail-ok')).toHaveLength(1);
    // Once the queue can be created again, the next occurrence clears the error.
    await owe('fail-a', 0);
    await fireDueSchedules(database.db, options());
    expect((await getSchedule('fail-a')).last_error).toBeNull();
  });

  it('a schedule the database refuses inside the shared batch is failed on its own; the others go on', async () => {
    await put('poison', { queue: 's-poison', cron: '* * * * *' });
    await put('healthy', { queue: 's-healthy', cron: '* * * * *' });
    // A cron this croner cannot read any more (written straight into the table): fails alone.
    await sql`UPDATE baton.schedules SET cron = 'not a cron' WHERE name = 'poison'`.execute(database.db);
    await owe('poison', 0);
    await owe('healthy', 0);
    const run = await fireDueSchedules(database.db, options());
    expect(run.failures.map((f) => f.name)).toEqual(['poison']);
    expect(await jobsOf('s-healthy')).toHaveLength(1);
    const poison = await getSchedule('poison');
    expect(poison.last_error.message).toMatch(/not a cron|invalid/i);
    expect(poison.next_run_at).toBeNull();
    await sql`DELETE FROM baton.schedules WHERE name = 'poison'`.execute(database.db);
  });

  it('counts occurrences and lateness in the metrics', async () => {
    const metrics = new Metrics();
    let now: Date | undefined;
    const duty = new SchedulesDuty(database.db, metrics, noLog, () => {}, {
      intervalMs: 500,
      graceMs: 10_000,
      enqueue: options().enqueue,
      now: () => now,
    });
    await put('mx', { queue: 's-mx', cron: '* * * * *', overlap: 'skip', catch_up: 'none' });
    await oweFrom('mx', '2026-01-01T08:00:00Z');
    now = new Date('2026-01-01T08:00:00.250Z');
    await duty.runOnce();
    now = new Date('2026-01-01T08:01:00.250Z');
    await duty.runOnce(); // the first job is still ready: skipped
    await sql`DELETE FROM baton.jobs WHERE queue = 's-mx'`.execute(database.db);
    now = new Date('2026-01-01T08:07:30Z');
    await duty.runOnce(); // 08:02 to 08:07 owed, the latest 30 s old: past a 10 s grace, all missed
    const text = await metrics.registry.metrics();
    const v = (outcome: string) =>
      metricValue(text, 'baton_schedule_occurrences_total', { queue: 's-mx', outcome });
    expect(v('enqueued')).toBe(1);
    expect(v('skipped')).toBe(1);
    expect(v('missed')).toBe(6);
    expect(metricValue(text, 'baton_schedule_lateness_seconds_count', { queue: 's-mx' })).toBe(1);
  });
});

describe('schedules on a running leader', () => {
  let leader: BatonApp;
  beforeAll(async () => {
    leader = await createTestApp(database, { BATON_MAINTENANCE: 'true', BATON_TICK_MS: '1000' });
    await until(() => leader.maintainer?.isLeader ?? false, 10_000);
  });
  afterAll(() => leader.close());

  it('an every-second schedule’s jobs arrive within a second of their occurrence (database clock), waking a long-poll', async () => {
    await api(leader).call('PUT', '/v1/schedules/live', { queue: 's-live', cron: '* * * * * *' });
    const res = await api(leader).claim('s-live', { wait_ms: 5000 });
    expect(res.body.jobs).toHaveLength(1);
    await api(leader).call('POST', '/v1/schedules/live/pause');
    const late = await sql<{ ms: number }>`
      SELECT extract(epoch FROM created_at - run_at)::float8 * 1000 AS ms FROM baton.jobs WHERE queue = 's-live'
      UNION ALL SELECT extract(epoch FROM created_at - run_at)::float8 * 1000 FROM baton.job_history WHERE queue = 's-live'`.execute(
      database.db,
    );
    expect(late.rows.length).toBeGreaterThanOrEqual(1);
    for (const { ms } of late.rows) expect(ms).toBeLessThan(1000);
  });
});
