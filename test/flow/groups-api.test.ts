import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { GroupStatsDuty, refreshGroupStats } from '../../src/maintenance/group-stats.js';
import { useTestApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { api } from '../support/http.js';

const database = useTestDatabase();
const app = useTestApp(database);

describe('queue limits', () => {
  it('are set, shown, kept when left out, and removed with null', async () => {
    const client = api(app);
    const put = await client.call('PUT', '/v1/queues/lim-q', {
      concurrency_limit: 5,
      rate_limit: { limit: 100, period_ms: 60_000 },
      group_concurrency_limit: 2,
      group_rate_limit: { limit: 10, period_ms: 1000 },
    });
    expect(put.status).toBe(201);
    expect(put.body).toMatchObject({
      concurrency_limit: 5,
      rate_limit: { limit: 100, period_ms: 60_000 },
      group_concurrency_limit: 2,
      group_rate_limit: { limit: 10, period_ms: 1000 },
      grouped: false,
    });
    const kept = await client.call('PUT', '/v1/queues/lim-q', { lease_ms: 5000 });
    expect(kept.body).toMatchObject({ concurrency_limit: 5, rate_limit: { limit: 100, period_ms: 60_000 } });
    const reset = await client.call('PUT', '/v1/queues/lim-q', { concurrency_limit: null, rate_limit: null });
    expect(reset.body).toMatchObject({
      concurrency_limit: null,
      rate_limit: null,
      group_concurrency_limit: 2,
    });
  });

  it('refuse bad values with a 400 naming the field, and store nothing', async () => {
    const client = api(app);
    const cases: [object, string][] = [
      [{ concurrency_limit: 0 }, 'concurrency_limit'],
      [{ concurrency_limit: -3 }, 'concurrency_limit'],
      [{ concurrency_limit: 1.5 }, 'concurrency_limit'],
      [{ group_concurrency_limit: 100_001 }, 'group_concurrency_limit'],
      [{ rate_limit: { limit: 0, period_ms: 1000 } }, 'rate_limit.limit'],
      [{ rate_limit: { limit: 5, period_ms: 99 } }, 'rate_limit.period_ms'],
      [{ rate_limit: { limit: 5, period_ms: 86_400_001 } }, 'rate_limit.period_ms'],
      [{ rate_limit: { limit: 5 } }, 'rate_limit.period_ms'],
      [{ group_rate_limit: { limit: 5, period_ms: 1000, burst: 3 } }, 'group_rate_limit.burst'],
      [{ concurency_limit: 3 }, 'concurency_limit'],
    ];
    for (const [body, field] of cases) {
      const res = await client.call('PUT', '/v1/queues/lim-bad', body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body.errors.map((e: { field: string }) => e.field)).toContain(field);
    }
    expect((await client.call('GET', '/v1/queues/lim-bad')).status).toBe(404);
  });
});

describe('the groups API', () => {
  it('overrides a group, shows the limits in effect, and resets it with DELETE', async () => {
    const client = api(app);
    await client.call('PUT', '/v1/queues/ga-q', {
      group_concurrency_limit: 3,
      group_rate_limit: { limit: 50, period_ms: 1000 },
    });
    const put = await client.call('PUT', '/v1/queues/ga-q/groups/customer:7', {
      concurrency_limit: 1,
      weight: 4,
    });
    expect(put.status).toBe(200);
    expect(put.body).toMatchObject({
      queue: 'ga-q',
      group: 'customer:7',
      concurrency_limit: 1,
      rate_limit: { limit: 50, period_ms: 1000 },
      weight: 4,
      paused: false,
      overridden: ['concurrency_limit', 'weight'],
      ready: 0,
    });
    const other = await client.call('GET', '/v1/queues/ga-q/groups/customer:8');
    expect(other.body).toMatchObject({ concurrency_limit: 3, weight: 1, overridden: [] });
    const partial = await client.call('PUT', '/v1/queues/ga-q/groups/customer:7', {
      weight: null,
      paused: true,
    });
    expect(partial.body).toMatchObject({ concurrency_limit: 1, weight: 1, paused: true });
    const del = await client.call('DELETE', '/v1/queues/ga-q/groups/customer:7');
    expect(del.body).toEqual({ queue: 'ga-q', group: 'customer:7', reset: true });
    expect((await client.call('GET', '/v1/queues/ga-q/groups/customer:7')).body).toMatchObject({
      concurrency_limit: 3,
      paused: false,
      overridden: [],
    });
    expect((await client.call('DELETE', '/v1/queues/ga-q/groups/customer:7')).body.reset).toBe(false);
  });

  it('answers 404 for an unknown queue and 400 naming the field for bad overrides', async () => {
    const client = api(app);
    expect((await client.call('PUT', '/v1/queues/ga-none/groups/g', { weight: 2 })).status).toBe(404);
    expect((await client.call('GET', '/v1/queues/ga-none/groups')).status).toBe(404);
    expect((await client.call('DELETE', '/v1/queues/ga-none/groups/g')).status).toBe(404);
    await client.call('PUT', '/v1/queues/ga-bad', {});
    const cases: [object, string][] = [
      [{ weight: 0 }, 'weight'],
      [{ weight: 1001 }, 'weight'],
      [{ concurrency_limit: 0 }, 'concurrency_limit'],
      [{ rate_limit: { limit: 1, period_ms: 0 } }, 'rate_limit.period_ms'],
      [{ paused: 'yes' }, 'paused'],
      [{ priority: 1 }, 'priority'],
    ];
    for (const [body, field] of cases) {
      const res = await client.call('PUT', '/v1/queues/ga-bad/groups/g', body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body.errors.map((e: { field: string }) => e.field)).toContain(field);
    }
    const longName = await client.call('PUT', `/v1/queues/ga-bad/groups/${'x'.repeat(129)}`, { weight: 2 });
    expect(longName.status).toBe(400);
    expect(longName.body.errors[0].field).toBe('group');
  });

  it('lists groups busiest first, a page at a time, from the counts the leader keeps', async () => {
    const client = api(app);
    const q = 'ga-list';
    const jobs = [
      ...Array.from({ length: 30 }, (_, i) => ({ payload: i, group: 'big' })),
      ...Array.from({ length: 20 }, (_, i) => ({ payload: i, group: 'mid' })),
      ...Array.from({ length: 10 }, (_, i) => ({ payload: i, group: 'small' })),
      ...Array.from({ length: 5 }, (_, i) => ({ payload: i })),
      { payload: 1, group: 'later', delay_ms: 3_600_000 },
    ];
    await client.enqueueBatch(q, jobs);
    await client.claim(q, { max_jobs: 6 });
    await client.call('PUT', `/v1/queues/${q}/groups/idle`, { paused: true });
    const duty = new GroupStatsDuty(database.db);
    expect((await duty.runOnce()).queues).toBeGreaterThan(0);

    const first = await client.call('GET', `/v1/queues/${q}/groups?limit=2`);
    expect(first.status).toBe(200);
    expect(first.body.groups.map((g: { group: string }) => g.group)).toEqual(['big', 'mid']);
    expect(first.body.groups[0]).toMatchObject({ ready: 28, claimed: 2, scheduled: 0 });
    const rest = await client.call('GET', `/v1/queues/${q}/groups?limit=10&cursor=${first.body.next_cursor}`);
    expect(rest.body.groups.map((g: { group: string | null }) => g.group)).toEqual([
      'small',
      null,
      'idle',
      'later',
    ]);
    expect(rest.body.groups.find((g: { group: string }) => g.group === 'later')).toMatchObject({
      scheduled: 1,
    });
    expect(rest.body.groups.find((g: { group: string }) => g.group === 'idle')).toMatchObject({
      paused: true,
    });
    expect(rest.body.next_cursor).toBeNull();
    expect(first.body.groups[0].refreshed_at).not.toBeNull();
    expect((await client.call('GET', `/v1/queues/${q}/groups?cursor=bad`)).status).toBe(400);

    // Drained groups drop out of the list at the next count; overridden ones stay.
    await sql`DELETE FROM baton.jobs WHERE queue = ${q} AND group_key = 'mid'`.execute(database.db);
    await refreshGroupStats(database.db);
    const after = await client.call('GET', `/v1/queues/${q}/groups`);
    expect(after.body.groups.map((g: { group: string }) => g.group)).not.toContain('mid');
    expect(after.body.groups.map((g: { group: string }) => g.group)).toContain('idle');
  });

  it('marks a queue grouped at its first grouped enqueue, and the leader catches a missed mark', async () => {
    const client = api(app);
    await client.enqueue('ga-mark', { payload: 1 });
    expect((await client.call('GET', '/v1/queues/ga-mark')).body.grouped).toBe(false);
    await client.enqueue('ga-mark', { payload: 2, group: 'a' });
    expect((await client.call('GET', '/v1/queues/ga-mark')).body.grouped).toBe(true);

    await sql`UPDATE baton.queues SET grouped = false WHERE name = 'ga-mark'`.execute(database.db);
    const result = await refreshGroupStats(database.db);
    expect(result.marked).toBe(1);
    expect((await client.call('GET', '/v1/queues/ga-mark')).body.grouped).toBe(true);
  });
});
