import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import { afterEach, describe, expect, it } from 'vitest';
import type { BatonApp } from '../../src/app.js';
import { createTestApp, loadStartup } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { apiKeyEntry, bearer } from '../support/keys.js';

/**
 * What keeps schedules from flooding a server: a minimum interval between a cron's occurrences
 * (BATON_SCHEDULE_MIN_INTERVAL_MS) and caps on how many schedules there are (BATON_MAX_SCHEDULES,
 * and BATON_MAX_SCHEDULES_PER_KEY for keys limited to queue patterns).
 */
const database = useTestDatabase();
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'baton-schedule-limits-'));

let app: BatonApp | undefined;
afterEach(async () => {
  await app?.close();
  app = undefined;
  // Every test counts from an empty table.
  await sql`DELETE FROM baton.schedules`.execute(database.db);
});

async function start(env: Record<string, string>) {
  app = await createTestApp(database, env);
  const put = async (name: string, body: object, headers: Record<string, string> = {}) => {
    const res = await app!.inject({ method: 'PUT', url: `/v1/schedules/${name}`, payload: body, headers });
    return { status: res.statusCode, body: res.json() };
  };
  const exists = async (name: string, headers: Record<string, string> = {}) =>
    (await app!.inject({ method: 'GET', url: `/v1/schedules/${name}`, headers })).statusCode === 200;
  return { put, exists };
}

describe('BATON_SCHEDULE_MIN_INTERVAL_MS', () => {
  it('a cron firing more often than allowed is a 400 naming cron, and nothing is written', async () => {
    const { put, exists } = await start({ BATON_SCHEDULE_MIN_INTERVAL_MS: '60000' });
    for (const cron of ['* * * * * *', '*/30 * * * * *', '0,1 0 0 * * *', '0,59 * * * * *']) {
      const res = await put('busy', { queue: 'q', cron });
      expect(res.status, `${cron} → ${JSON.stringify(res.body)}`).toBe(400);
      expect(res.body.code).toBe('validation_failed');
      expect(res.body.errors[0].field).toBe('cron');
      expect(res.body.detail).toContain('BATON_SCHEDULE_MIN_INTERVAL_MS');
      expect(await exists('busy')).toBe(false);
    }
    // Exactly the interval is allowed: once a minute, at second 0 or as a five-field cron.
    for (const cron of ['0 * * * * *', '* * * * *', '@hourly']) {
      expect((await put('busy', { queue: 'q', cron })).status, cron).toBeLessThan(300);
    }
    // A replace with a too-frequent cron leaves the schedule as it was.
    expect((await put('busy', { queue: 'q', cron: '*/5 * * * * *' })).status).toBe(400);
    const kept = await app!.inject({ method: 'GET', url: '/v1/schedules/busy' });
    expect(kept.json().cron).toBe('@hourly');
  });

  it('by default (1000 ms) a seconds cron is accepted: a cron cannot say less than a second', async () => {
    const { put } = await start({});
    expect((await put('every-second', { queue: 'q', cron: '* * * * * *' })).status).toBe(201);
  });

  it('in BATON_SCHEDULES_FILE, such a cron stops start-up naming the entry', () => {
    const file = path.join(dir, 'busy.yaml');
    fs.writeFileSync(
      file,
      'schedules:\n  ok: { queue: q, cron: "@daily" }\n  busy: { queue: q, cron: "* * * * * *" }\n',
    );
    expect(() =>
      loadStartup({ BATON_SCHEDULES_FILE: file, BATON_SCHEDULE_MIN_INTERVAL_MS: '60000' }),
    ).toThrow(
      /BATON_SCHEDULES_FILE schedules\.busy\.cron fires 1000 ms apart .*BATON_SCHEDULE_MIN_INTERVAL_MS/,
    );
    expect(loadStartup({ BATON_SCHEDULES_FILE: file }).fileSchedules).toHaveLength(2);
  });
});

describe('BATON_MAX_SCHEDULES', () => {
  it('a PUT that would create one more is 409 schedule_limit_reached; replacing one is not refused', async () => {
    const { put, exists } = await start({ BATON_MAX_SCHEDULES: '2' });
    expect((await put('one', { queue: 'q', cron: '@daily' })).status).toBe(201);
    expect((await put('two', { queue: 'q', cron: '@daily' })).status).toBe(201);
    const third = await put('three', { queue: 'q', cron: '@daily' });
    expect(third.status).toBe(409);
    expect(third.body.code).toBe('schedule_limit_reached');
    expect(third.body.detail).toContain('BATON_MAX_SCHEDULES');
    expect(await exists('three')).toBe(false);
    expect((await put('two', { queue: 'q', cron: '@hourly' })).status).toBe(200);
    // A bad definition is still a 400 (the cap is looked at after the definition).
    expect((await put('three', { queue: 'q', cron: '61 * * * *' })).status).toBe(400);
    await app!.inject({ method: 'DELETE', url: '/v1/schedules/one' });
    expect((await put('three', { queue: 'q', cron: '@daily' })).status).toBe(201);
  });

  it('concurrent creations cannot overshoot the cap', async () => {
    const { put } = await start({ BATON_MAX_SCHEDULES: '5' });
    const answers = await Promise.all(
      Array.from({ length: 20 }, (_, i) => put(`race-${i}`, { queue: 'q', cron: '@daily' })),
    );
    expect(answers.filter((a) => a.status === 201)).toHaveLength(5);
    expect(answers.filter((a) => a.status === 409)).toHaveLength(15);
    const { rows } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM baton.schedules`.execute(
      database.db,
    );
    expect(rows[0]!.n).toBe(5);
  });

  it('a schedules file with more entries than the cap stops start-up', () => {
    const file = path.join(dir, 'many.yaml');
    fs.writeFileSync(
      file,
      'schedules:\n  a: { queue: q, cron: "@daily" }\n  b: { queue: q, cron: "@daily" }\n',
    );
    expect(() => loadStartup({ BATON_SCHEDULES_FILE: file, BATON_MAX_SCHEDULES: '1' })).toThrow(
      'BATON_SCHEDULES_FILE declares 2 schedules, more than BATON_MAX_SCHEDULES (1)',
    );
  });
});

describe('BATON_MAX_SCHEDULES_PER_KEY', () => {
  const key = (name: string, queues?: string[]) => apiKeyEntry(name, ['admin'], queues);

  it('a queue-limited key may create schedules on its queues up to its cap; other keys are not held by it', async () => {
    const { put, exists } = await start({
      BATON_API_KEYS: JSON.stringify([key('root'), key('team-a', ['a.*']), key('team-b', ['b.*'])]),
      BATON_MAX_SCHEDULES_PER_KEY: '2',
    });
    expect((await put('a-1', { queue: 'a.one', cron: '@daily' }, bearer('team-a'))).status).toBe(201);
    expect((await put('a-2', { queue: 'a.two', cron: '@daily' }, bearer('team-a'))).status).toBe(201);
    const over = await put('a-3', { queue: 'a.one', cron: '@daily' }, bearer('team-a'));
    expect(over.status).toBe(409);
    expect(over.body.code).toBe('schedule_limit_reached');
    expect(over.body.detail).toContain('BATON_MAX_SCHEDULES_PER_KEY');
    expect(await exists('a-3', bearer('root'))).toBe(false);
    // Its own schedules can still be replaced; another tenant has its own room; a key without queue
    // limits is held by BATON_MAX_SCHEDULES only, even on team a's queues.
    expect((await put('a-1', { queue: 'a.one', cron: '@hourly' }, bearer('team-a'))).status).toBe(200);
    expect((await put('b-1', { queue: 'b.one', cron: '@daily' }, bearer('team-b'))).status).toBe(201);
    expect((await put('a-3', { queue: 'a.one', cron: '@daily' }, bearer('root'))).status).toBe(201);
  });
});

describe("a queue-limited key's scope over schedules", () => {
  it('holds in the statements: another tenant’s schedule is not found, paused, triggered, deleted or replaced by its name', async () => {
    // Auth looks a schedule's queue up before the handler runs; a PUT that moves the schedule to
    // another queue meanwhile must not open it to the first key. The service is called as a handler
    // would be after such a move: with team a's patterns, over a schedule now on team b's queue.
    const { put } = await start({ BATON_API_KEYS: JSON.stringify([apiKeyEntry('root', ['admin'])]) });
    expect(
      (await put('shared', { queue: 'b.one', cron: '@daily', payload: { v: 'b' } }, bearer('root'))).status,
    ).toBe(201);
    const { schedules } = app!.service;
    const a = ['^a\\..*$'];
    const refused = async (p: Promise<unknown>) =>
      await p.then(
        () => undefined,
        (err: { code?: string }) => err.code,
      );
    expect(await refused(schedules.get('shared', a))).toBe('not_found');
    expect(await refused(schedules.setPaused('shared', true, a))).toBe('not_found');
    expect(await refused(schedules.trigger('shared', a))).toBe('not_found');
    expect(await refused(schedules.delete('shared', a))).toBe('not_found');
    const def = {
      queue: 'a.one',
      cron: '@daily',
      timezone: 'UTC',
      payloadJson: '{"v":"a"}',
      priority: 0,
      maxAttempts: null,
      group: null,
      timeoutMs: null,
      expiresInMs: null,
      uniqueKey: null,
      onConflict: null,
      overlap: 'allow',
      catchUp: 'latest',
      paused: false,
    } as const;
    expect(await refused(schedules.put('shared', def, a))).toBe('forbidden');
    expect((await schedules.list(10, undefined, a)).map((s) => s.name)).toEqual([]);
    // Nothing changed: the schedule is team b's as it was, unpaused, with no job enqueued.
    const row = await schedules.get('shared');
    expect([row.queue, row.paused, row.payload_json, row.last_job_id]).toEqual([
      'b.one',
      false,
      '{"v": "b"}',
      null,
    ]);
    // With patterns that allow it, the same calls work.
    expect((await schedules.setPaused('shared', true, ['^b\\..*$'])).paused).toBe(true);
  });
});
