import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import { afterEach, describe, expect, it } from 'vitest';
import { noLog } from '../../src/logger.js';
import { SchedulesDuty } from '../../src/maintenance/schedules.js';
import { Metrics } from '../../src/metrics/metrics.js';
import { createTestApp, loadStartup, useTestApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { api } from '../support/http.js';
import { metricValue } from '../support/prometheus.js';

/**
 * The job fields a schedule gives each job it enqueues besides priority and max_attempts: group,
 * timeout_ms, expires_in_ms, unique_key (with on_conflict). Through the PUT, the file, the leader's
 * duty (at a given database time, as test/maintenance/schedules.test.ts does) and the trigger.
 */

const database = useTestDatabase();
const app = useTestApp(database);
const call = (method: 'GET' | 'POST' | 'PUT' | 'DELETE', url: string, body?: object) =>
  api(app).call(method, url, body);

const FIELDS = {
  group: 'customer:42',
  timeout_ms: 30_000,
  expires_in_ms: 3_600_000,
  unique_key: 'nightly',
};

/** The duty, acting at `now` (database time) on each run. */
function dutyAt() {
  const metrics = new Metrics();
  const duty = { now: undefined as Date | undefined, metrics, runAt: async (_iso: string) => {} };
  const inner = new SchedulesDuty(database.db, metrics, noLog, () => {}, {
    intervalMs: 500,
    graceMs: 60_000,
    enqueue: { autoCreate: { enabled: true, maxQueues: 100 }, defaultMaxAttempts: 5 },
    now: () => duty.now,
  });
  duty.runAt = async (iso: string) => {
    duty.now = new Date(iso);
    await inner.runOnce();
  };
  return duty;
}

/** Owe the occurrences from a fixed time (every-minute crons). */
const oweFrom = (name: string, iso: string) =>
  sql`UPDATE baton.schedules SET next_run_at = ${iso}::timestamptz WHERE name = ${name}`.execute(database.db);

const liveJobs = async (queue: string) =>
  (
    await sql<{ id: string }>`
      SELECT id::text FROM baton.jobs WHERE queue = ${queue}
      UNION ALL SELECT id::text FROM baton.scheduled_jobs WHERE queue = ${queue} ORDER BY 1`.execute(
      database.db,
    )
  ).rows.map((r) => r.id);

describe('schedule job fields', () => {
  afterEach(async () => {
    await sql`DELETE FROM baton.schedules`.execute(database.db);
  });

  it('PUT stores them, GET and the list show them; left out they are null', async () => {
    const put = await call('PUT', '/v1/schedules/jf-show', {
      queue: 'jf-show',
      cron: '* * * * *',
      ...FIELDS,
    });
    expect(put.status, JSON.stringify(put.body)).toBe(201);
    const shown = { ...FIELDS, on_conflict: 'keep' };
    expect(put.body).toMatchObject(shown);
    expect((await call('GET', '/v1/schedules/jf-show')).body).toMatchObject(shown);
    const list = (await call('GET', '/v1/schedules?limit=500')).body.schedules;
    expect(list.find((s: { name: string }) => s.name === 'jf-show')).toMatchObject(shown);
    // A PUT sets the whole definition: left out, each is null again.
    const plain = await call('PUT', '/v1/schedules/jf-show', { queue: 'jf-show', cron: '* * * * *' });
    expect(plain.body).toMatchObject({
      group: null,
      timeout_ms: null,
      expires_in_ms: null,
      unique_key: null,
      on_conflict: null,
    });
  });

  it.each([
    [{ group: 'has space' }, 'group'],
    [{ group: '' }, 'group'],
    [{ timeout_ms: 999 }, 'timeout_ms'],
    [{ timeout_ms: 604_800_001 }, 'timeout_ms'],
    [{ timeout_ms: 1.5 }, 'timeout_ms'],
    [{ expires_in_ms: -1 }, 'expires_in_ms'],
    // 0 would expire every job as it is enqueued: it could never run.
    [{ expires_in_ms: 0 }, 'expires_in_ms'],
    [{ expires_in_ms: 315_360_000_001 }, 'expires_in_ms'],
    [{ unique_key: '' }, 'unique_key'],
    [{ unique_key: 'x'.repeat(256) }, 'unique_key'],
    [{ unique_key: 'a\u0000b' }, 'unique_key'],
    [{ unique_key: 'k', on_conflict: 'merge' }, 'on_conflict'],
    [{ on_conflict: 'keep' }, 'on_conflict'],
  ])('PUT with %j is a 400 naming %s', async (extra, field) => {
    const res = await call('PUT', '/v1/schedules/jf-bad', { queue: 'q', cron: '* * * * *', ...extra });
    expect(res.status, JSON.stringify(res.body)).toBe(400);
    expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(res.body.code).toBe('validation_failed');
    expect(res.body.errors[0].field).toBe(field);
    expect(res.body.detail).toContain(field);
    expect((await call('GET', '/v1/schedules/jf-bad')).status).toBe(404);
  });

  it('the values at the edges of each range are stored (PostgreSQL takes what the API takes)', async () => {
    for (const edge of [
      { timeout_ms: 1000, expires_in_ms: 1, unique_key: 'x'.repeat(255), group: '!'.repeat(128) },
      { timeout_ms: 604_800_000, expires_in_ms: 315_360_000_000, unique_key: '\u{1F600}'.repeat(255) },
    ]) {
      const res = await call('PUT', '/v1/schedules/jf-edge', { queue: 'q', cron: '* * * * *', ...edge });
      expect(res.status, JSON.stringify(res.body)).toBeLessThan(300);
      expect(res.body).toMatchObject(edge);
    }
  });

  it('an occurrence enqueues a job carrying them; the group marks the queue grouped', async () => {
    expect((await call('PUT', '/v1/queues/jf-fire', {})).body.grouped).toBe(false);
    await call('PUT', '/v1/schedules/jf-fire', { queue: 'jf-fire', cron: '* * * * *', ...FIELDS });
    await oweFrom('jf-fire', '2026-01-01T08:00:00Z');
    const duty = dutyAt();
    await duty.runAt('2026-01-01T08:00:00.250Z');
    const [id] = await liveJobs('jf-fire');
    const job = (await api(app).get(id!)).body;
    expect(job).toMatchObject({
      queue: 'jf-fire',
      group: 'customer:42',
      timeout_ms: 30_000,
      unique_key: 'nightly',
      run_at: '2026-01-01T08:00:00.000Z',
    });
    // expires_in_ms counts from the enqueue (the job's created_at), not from the occurrence.
    expect(Date.parse(job.expires_at) - Date.parse(job.created_at)).toBe(3_600_000);
    expect((await call('GET', '/v1/queues/jf-fire')).body.grouped).toBe(true);
    // A claim sees the group, and the attempt gets its deadline from timeout_ms.
    const claimed = (await api(app).claim('jf-fire')).body.jobs[0];
    expect(claimed).toMatchObject({ id, group: 'customer:42' });
    expect(claimed.deadline_at).not.toBeNull();
  });

  it('trigger enqueues a job carrying them; with the key held by a waiting job it answers that job (200)', async () => {
    await call('PUT', '/v1/schedules/jf-trig', {
      queue: 'jf-trig',
      cron: '0 0 1 1 *',
      ...FIELDS,
      expires_in_ms: 60_000,
    });
    const first = await call('POST', '/v1/schedules/jf-trig/trigger');
    expect(first.status).toBe(201);
    const job = (await api(app).get(first.body.id)).body;
    expect(job).toMatchObject({ group: 'customer:42', timeout_ms: 30_000, unique_key: 'nightly' });
    expect(Date.parse(job.expires_at) - Date.parse(job.created_at)).toBe(60_000);
    const again = await call('POST', '/v1/schedules/jf-trig/trigger');
    expect(again.status).toBe(200);
    expect(again.body.id).toBe(first.body.id);
    expect(await liveJobs('jf-trig')).toEqual([first.body.id]);
    // Claimed, it no longer holds the key: the next trigger makes a new job.
    await api(app).claim('jf-trig');
    const third = await call('POST', '/v1/schedules/jf-trig/trigger');
    expect(third.status).toBe(201);
    expect(third.body.id).not.toBe(first.body.id);
  });

  it('unique_key keep: an occurrence whose previous job still waits is folded into it; a claimed one does not count', async () => {
    await call('PUT', '/v1/schedules/jf-keep', {
      queue: 'jf-keep',
      cron: '* * * * *',
      unique_key: 'sync',
      payload: { v: 1 },
    });
    await oweFrom('jf-keep', '2026-01-01T08:00:00Z');
    const duty = dutyAt();
    await duty.runAt('2026-01-01T08:00:00.250Z');
    const [first] = await liveJobs('jf-keep');
    await duty.runAt('2026-01-01T08:01:00.250Z');
    // Folded: still the one job, unchanged, and it is the schedule's last job.
    expect(await liveJobs('jf-keep')).toEqual([first]);
    expect((await api(app).get(first!)).body.run_at).toBe('2026-01-01T08:00:00.000Z');
    expect((await call('GET', '/v1/schedules/jf-keep')).body).toMatchObject({
      last_job_id: first,
      last_run_at: '2026-01-01T08:01:00.000Z',
      next_run_at: '2026-01-01T08:02:00.000Z',
    });
    // Unlike overlap skip, a claimed job does not hold the key: the next occurrence enqueues.
    await api(app).claim('jf-keep');
    await duty.runAt('2026-01-01T08:02:00.250Z');
    const live = await liveJobs('jf-keep');
    expect(live).toHaveLength(2);
    const text = await duty.metrics.registry.metrics();
    const v = (outcome: string) =>
      metricValue(text, 'baton_schedule_occurrences_total', { queue: 'jf-keep', outcome });
    expect(v('enqueued')).toBe(2);
    expect(v('folded')).toBe(1);
    expect(v('duplicate') ?? 0).toBe(0);
  });

  it('concurrent triggers and enqueues sharing the unique_key leave one waiting job, which every answer names', async () => {
    await call('PUT', '/v1/schedules/jf-race', { queue: 'jf-race', cron: '0 0 1 1 *', unique_key: 'shared' });
    const answers = await Promise.all([
      ...Array.from({ length: 10 }, () => call('POST', '/v1/schedules/jf-race/trigger')),
      ...Array.from({ length: 10 }, (_, i) =>
        call('POST', '/v1/queues/jf-race/jobs', { payload: { i }, unique_key: 'shared' }),
      ),
    ]);
    const live = await liveJobs('jf-race');
    expect(live).toHaveLength(1);
    expect(answers.map((a) => a.body.id)).toEqual(Array(20).fill(live[0]));
    expect(answers.filter((a) => a.status === 201)).toHaveLength(1);
  });

  it('unique_key replace: the waiting job takes the later occurrence', async () => {
    await call('PUT', '/v1/schedules/jf-replace', {
      queue: 'jf-replace',
      cron: '* * * * *',
      unique_key: 'sync',
      on_conflict: 'replace',
    });
    await oweFrom('jf-replace', '2026-01-01T08:00:00Z');
    const duty = dutyAt();
    await duty.runAt('2026-01-01T08:00:00.250Z');
    const [first] = await liveJobs('jf-replace');
    await duty.runAt('2026-01-01T08:01:00.250Z');
    expect(await liveJobs('jf-replace')).toEqual([first]);
    expect((await api(app).get(first!)).body.run_at).toBe('2026-01-01T08:01:00.000Z');
  });
});

describe('schedule job fields in BATON_SCHEDULES_FILE', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'baton-schedule-fields-'));
  const write = (name: string, text: string) => {
    const file = path.join(dir, name);
    fs.writeFileSync(file, text);
    return file;
  };
  const start = async (file: string) =>
    (await createTestApp(database, { BATON_SCHEDULES_FILE: file })).close();

  it('are read from the file, shown, and compared: the same file again is unchanged, a PUT of other values drifts', async () => {
    const file = write(
      'fields.yaml',
      `schedules:
  jf-file:
    queue: jf-file
    cron: "@daily"
    group: "customer:42"
    timeout_ms: 30000
    expires_in_ms: 3600000
    unique_key: nightly
    on_conflict: replace
`,
    );
    await start(file);
    const fromFile = (await call('GET', '/v1/schedules/jf-file')).body;
    expect(fromFile).toMatchObject({ ...FIELDS, on_conflict: 'replace', source: 'file', drifted: false });
    await start(file);
    expect((await call('GET', '/v1/schedules/jf-file')).body).toEqual(fromFile);
    // The same definition through the API is no drift; another timeout_ms is.
    const def = { queue: 'jf-file', cron: '@daily', ...FIELDS, on_conflict: 'replace' };
    expect((await call('PUT', '/v1/schedules/jf-file', def)).body.drifted).toBe(false);
    expect((await call('PUT', '/v1/schedules/jf-file', { ...def, timeout_ms: 60_000 })).body.drifted).toBe(
      true,
    );
    await start(file);
    expect((await call('GET', '/v1/schedules/jf-file')).body).toMatchObject({
      timeout_ms: 60_000,
      drifted: true,
    });
    await call('DELETE', '/v1/schedules/jf-file');
  });

  it('a bad value stops start-up naming the schedule and the field', () => {
    for (const [field, value, message] of [
      ['group', '"a b"', /schedules\.x\.group must be a group name/],
      ['timeout_ms', '500', /schedules\.x\.timeout_ms must be an integer from 1000/],
      ['expires_in_ms', '0', /schedules\.x\.expires_in_ms must be an integer from 1/],
      ['unique_key', '""', /schedules\.x\.unique_key must be 1-255 printable characters/],
      ['on_conflict', 'keep', /schedules\.x\.on_conflict needs unique_key/],
    ] as const) {
      const file = write(
        `bad-${field}.yaml`,
        `schedules:\n  x: { queue: q, cron: "@daily", ${field}: ${value} }\n`,
      );
      expect(() => loadStartup({ BATON_SCHEDULES_FILE: file }), field).toThrow(message);
    }
  });
});
