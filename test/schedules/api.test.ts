import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createTestApp, useTestApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { api } from '../support/http.js';

const database = useTestDatabase();
const app = useTestApp(database);
const call = (method: 'GET' | 'POST' | 'PUT' | 'DELETE', url: string, body?: object) =>
  api(app).call(method, url, body);

describe('/v1/schedules', () => {
  it('PUT creates (201) with defaults, GET shows next_run_at; a second PUT replaces (200)', async () => {
    const created = await call('PUT', '/v1/schedules/nightly', { queue: 'reports', cron: '30 2 * * *' });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({
      name: 'nightly',
      queue: 'reports',
      cron: '30 2 * * *',
      timezone: 'UTC',
      payload: null,
      priority: 0,
      max_attempts: null,
      overlap: 'allow',
      catch_up: 'latest',
      paused: false,
      last_run_at: null,
      last_job_id: null,
      last_error: null,
      source: 'api',
      drifted: false,
    });
    expect(created.body.next_run_at).toMatch(/T02:30:00\.000Z$/);
    const replaced = await call('PUT', '/v1/schedules/nightly', {
      queue: 'reports',
      cron: '30 2 * * *',
      timezone: 'Europe/Berlin',
      payload: { kind: 'nightly' },
      max_attempts: 3,
      overlap: 'skip',
      catch_up: 'none',
    });
    expect(replaced.status).toBe(200);
    expect(replaced.body).toMatchObject({
      timezone: 'Europe/Berlin',
      payload: { kind: 'nightly' },
      max_attempts: 3,
    });
    // 02:30 in Berlin is 00:30 or 01:30 UTC, depending on the season.
    expect(replaced.body.next_run_at).toMatch(/T0[01]:30:00\.000Z$/);
    expect((await call('GET', '/v1/schedules/nightly')).body).toEqual(replaced.body);
  });

  it.each([
    [{ queue: 'q', cron: '61 * * * *' }, 'cron'],
    [{ queue: 'q', cron: '0 0 30 2 *' }, 'cron'],
    [{ queue: 'q', cron: '* * * * *', timezone: 'Mars/Olympus' }, 'timezone'],
    // Node's Intl takes these, but the zone database has no such names (an offset has no DST rule).
    [{ queue: 'q', cron: '* * * * *', timezone: '+02:00' }, 'timezone'],
    [{ queue: 'q', cron: '* * * * *', timezone: '-0500' }, 'timezone'],
    [{ queue: 'q', cron: '* * * * *', timezone: 'europe/paris' }, 'timezone'],
    [{ queue: 'q', cron: '* * * * *', timezone: 'utc' }, 'timezone'],
    [{ queue: 'q', cron: '* * * * *', timezone: 'US/EASTERN' }, 'timezone'],
    [{ queue: 'q', cron: '* * * * *', overlap: 'sometimes' }, 'overlap'],
    [{ queue: 'q', cron: '* * * * *', catch_up: 'everything' }, 'catch_up'],
    [{ queue: 'bad queue', cron: '* * * * *' }, 'queue'],
    [{ queue: 'q', cron: '* * * * *', every: '5m' }, 'every'],
    [{ cron: '* * * * *' }, 'queue'],
    [{ queue: 'q', cron: '* * * * *', max_attempts: 0 }, 'max_attempts'],
  ])('PUT %j is a 400 naming %s', async (body, field) => {
    const res = await call('PUT', '/v1/schedules/bad', body);
    expect(res.status, JSON.stringify(res.body)).toBe(400);
    expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(res.body.code).toBe('validation_failed');
    expect(res.body.errors[0].field).toBe(field);
    expect(res.body.detail).toContain(field);
  });

  it('time zones as the zone database spells them are accepted and kept as given, links too', async () => {
    for (const timezone of [
      'UTC',
      'Europe/Paris',
      'America/Argentina/Buenos_Aires',
      'Etc/GMT-2',
      'Etc/UTC',
      'US/Eastern',
      'Asia/Kolkata',
      'Australia/ACT',
    ]) {
      const res = await call('PUT', '/v1/schedules/tz-ok', { queue: 'q', cron: '@daily', timezone });
      expect(res.status, `${timezone} → ${JSON.stringify(res.body)}`).toBeLessThan(300);
      expect(res.body.timezone).toBe(timezone);
    }
    const refused = await call('PUT', '/v1/schedules/tz-ok', {
      queue: 'q',
      cron: '@daily',
      timezone: '+02:00',
    });
    expect(refused.body.detail).toContain('not an offset');
    // Nothing written: the schedule keeps the last zone it was given.
    expect((await call('GET', '/v1/schedules/tz-ok')).body.timezone).toBe('Australia/ACT');
  });

  it('any cron or time zone text is a 201 or a 400 naming it, never a 5xx', async () => {
    const text = fc.oneof(
      fc.string({ maxLength: 40 }),
      fc.constantFrom(
        '* * * * * * *',
        '@reboot',
        'L W # ?',
        '0 0 L * *',
        '*/0 * * * *',
        '\u0000',
        'Etc/GMT+14',
        'UTC\n',
      ),
    );
    await fc.assert(
      fc.asyncProperty(text, text, async (cron, timezone) => {
        const res = await call('PUT', '/v1/schedules/fuzz', { queue: 'fuzz', cron, timezone });
        expect(
          res.status,
          `${JSON.stringify({ cron, timezone })} → ${JSON.stringify(res.body)}`,
        ).toBeLessThan(500);
        if (res.status === 400) expect(['cron', 'timezone']).toContain(res.body.errors[0].field);
        else expect(res.status).toBeLessThan(300);
      }),
      { numRuns: 150 },
    );
  });

  it('a schedule name is checked like a queue name', async () => {
    const res = await call('PUT', '/v1/schedules/no%20spaces', { queue: 'q', cron: '* * * * *' });
    expect(res.status).toBe(400);
    expect(res.body.errors[0].field).toBe('name');
  });

  it('lists a page at a time, in name order', async () => {
    for (const n of ['list-a', 'list-b', 'list-c'])
      await call('PUT', `/v1/schedules/${n}`, { queue: 'l', cron: '@daily' });
    const first = await call('GET', '/v1/schedules?limit=2');
    expect(first.body.schedules).toHaveLength(2);
    const names = [...first.body.schedules.map((s: { name: string }) => s.name)];
    let cursor = first.body.next_cursor;
    while (cursor) {
      const page = await call('GET', `/v1/schedules?limit=2&cursor=${encodeURIComponent(cursor)}`);
      names.push(...page.body.schedules.map((s: { name: string }) => s.name));
      cursor = page.body.next_cursor;
    }
    expect(names).toEqual([...names].sort());
    expect(names).toEqual(expect.arrayContaining(['list-a', 'list-b', 'list-c']));
    expect((await call('GET', '/v1/schedules?cursor=nonsense')).status).toBe(400);
  });

  it('pause hides next_run_at, resume brings it back; trigger enqueues one job now, even paused', async () => {
    await call('PUT', '/v1/schedules/trig', {
      queue: 'trig-q',
      cron: '0 0 1 1 *',
      payload: { t: 1 },
      priority: 7,
    });
    expect((await call('POST', '/v1/schedules/trig/pause')).body).toMatchObject({
      paused: true,
      next_run_at: null,
    });
    const job = await call('POST', '/v1/schedules/trig/trigger');
    expect(job.status).toBe(201);
    expect(job.body).toMatchObject({ queue: 'trig-q', state: 'ready', priority: 7 });
    const schedule = (await call('GET', '/v1/schedules/trig')).body;
    expect(schedule.last_job_id).toBe(job.body.id);
    expect(schedule.last_run_at).not.toBeNull();
    expect((await api(app).get(job.body.id)).body.payload).toEqual({ t: 1 });
    const resumed = await call('POST', '/v1/schedules/trig/resume');
    expect(resumed.body.paused).toBe(false);
    expect(resumed.body.next_run_at).toMatch(/-01-01T00:00:00\.000Z$/);
  });

  it('DELETE removes it (404 after); unknown names are 404 not_found on every route', async () => {
    await call('PUT', '/v1/schedules/gone', { queue: 'g', cron: '@hourly' });
    expect((await call('DELETE', '/v1/schedules/gone')).body).toEqual({ name: 'gone', deleted: true });
    for (const [method, url] of [
      ['GET', '/v1/schedules/gone'],
      ['DELETE', '/v1/schedules/gone'],
      ['POST', '/v1/schedules/gone/pause'],
      ['POST', '/v1/schedules/gone/resume'],
      ['POST', '/v1/schedules/gone/trigger'],
    ] as const) {
      const res = await call(method, url);
      expect(res.status, `${method} ${url}`).toBe(404);
      expect(res.body.code).toBe('not_found');
    }
  });

  it('with auto-create off, a schedule for a queue that does not exist is 404 queue_not_found', async () => {
    const strict = await createTestApp(database, { BATON_AUTO_CREATE_QUEUES: 'false' });
    try {
      const res = await api(strict).call('PUT', '/v1/schedules/strict', { queue: 'nowhere', cron: '@daily' });
      expect(res.status).toBe(404);
      expect(res.body.code).toBe('queue_not_found');
    } finally {
      await strict.close();
    }
  });
});
