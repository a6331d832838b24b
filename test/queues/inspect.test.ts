import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { redriveDeadJobs } from '../../src/jobs/redrive.js';
import { refreshFinishedStats, refreshLiveStats } from '../../src/maintenance/queue-stats.js';
import { useTestApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { api, enqueueAndClaim } from '../support/http.js';

const database = useTestDatabase();
const app = useTestApp(database);
const list = (queue: string, query: string) => api(app).call('GET', `/v1/queues/${queue}/jobs?${query}`);

async function killAll(queue: string, count: number) {
  await api(app).enqueueBatch(
    queue,
    Array.from({ length: count }, (_, i) => ({ payload: i, max_attempts: 1 })),
  );
  const ids: string[] = [];
  while (ids.length < count) {
    const jobs = (await api(app).claim(queue, { max_jobs: 1000 })).body.jobs;
    await Promise.all(
      jobs.map((j: { id: string; lease_token: string }) =>
        api(app).nack(j.id, { lease_token: j.lease_token }),
      ),
    );
    ids.push(...jobs.map((j: { id: string }) => j.id));
  }
  return ids;
}

describe('queue stats', () => {
  it('reports counts by state, the oldest ready job and the last minute’s completions', async () => {
    const q = 'i-stats';
    await api(app).enqueueBatch(q, [
      { payload: 1, run_at: '2020-01-01T00:00:00Z' },
      { payload: 2 },
      { payload: 3, delay_ms: 60_000 },
    ]);
    const done = await enqueueAndClaim(app, q, { payload: 4, priority: 9 });
    await api(app).ack(done.id, { lease_token: done.lease_token });
    await enqueueAndClaim(app, q, { payload: 5, priority: 9 });
    await killAll(`${q}-dead`, 2);
    await refreshLiveStats(database.db);
    await refreshFinishedStats(database.db);
    const res = await api(app).call('GET', `/v1/queues/${q}`);
    expect(res.body.stats).toMatchObject({
      scheduled: 1,
      ready: 2,
      claimed: 1,
      completed: 1,
      dead: 0,
      completed_last_minute: 1,
    });
    expect(res.body.stats.oldest_ready_age_ms).toBeGreaterThan(Date.now() - Date.UTC(2020, 0, 2));
    const dead = await api(app).call('GET', `/v1/queues/${q}-dead`);
    expect(dead.body.stats).toMatchObject({ dead: 2, ready: 0 });
  });

  it('lists every queue, a page at a time', async () => {
    for (const n of ['i-list-a', 'i-list-b', 'i-list-c']) await api(app).call('PUT', `/v1/queues/${n}`, {});
    const names: string[] = [];
    let cursor: string | null = null;
    do {
      const res: { body: { queues: { name: string }[]; next_cursor: string | null } } = await api(app).call(
        'GET',
        `/v1/queues?limit=2${cursor ? `&cursor=${cursor}` : ''}`,
      );
      names.push(...res.body.queues.map((q) => q.name));
      cursor = res.body.next_cursor;
    } while (cursor);
    expect(names).toEqual([...names].sort());
    expect(names).toEqual(expect.arrayContaining(['i-list-a', 'i-list-b', 'i-list-c']));
    expect(new Set(names).size).toBe(names.length);
  });
});

describe('GET /v1/queues/{queue}/jobs', () => {
  it('lists a state in its order, without payloads unless asked, newest first with order=desc', async () => {
    const q = 'i-order';
    await api(app).enqueueBatch(q, [
      { payload: 'low', priority: 1 },
      { payload: 'high', priority: 5 },
      { payload: 'later', delay_ms: 60_000 },
    ]);
    const ready = await list(q, 'state=ready');
    expect(ready.status).toBe(200);
    expect(ready.body.jobs.map((j: { priority: number }) => j.priority)).toEqual([5, 1]);
    expect(ready.body.jobs[0].payload).toBeNull();
    expect(ready.body.next_cursor).toBeNull();
    const withPayload = await list(q, 'state=ready&order=desc&include_payload=true');
    expect(withPayload.body.jobs.map((j: { payload: string }) => j.payload)).toEqual(['low', 'high']);
    expect((await list(q, 'state=scheduled')).body.jobs).toHaveLength(1);
    expect((await list(q, 'state=completed')).body.jobs).toHaveLength(0);
  });

  it('shows the start of each payload when payloads are left out: cut at 120 characters, on every list', async () => {
    const q = 'i-preview';
    const long = { text: 'é'.repeat(200), emoji: '😀'.repeat(10) };
    const cut = `${'x'.repeat(117)}😀😀😀`;
    await api(app).enqueueBatch(q, [
      { payload: { n: 1 } },
      { payload: long },
      { payload: cut },
      { payload: null },
    ]);
    const previews = (await list(q, 'state=ready')).body.jobs.map(
      (j: { payload_preview: string }) => j.payload_preview,
    );
    expect(previews[0]).toBe('{"n":1}');
    expect(previews[1]).toHaveLength(120);
    expect(previews[1]).toBe(`${JSON.stringify(long).slice(0, 119)}…`);
    // 119 characters would end inside an emoji (a surrogate pair): the cut comes before it.
    expect(JSON.stringify(cut).slice(0, 119)).toMatch(/[\uD800-\uDBFF]$/);
    expect(previews[2]).toBe(`${JSON.stringify(cut).slice(0, 118)}…`);
    expect(previews[3]).toBe('null');
    // The failure lists across queues show it too; with include_payload the whole payload comes instead.
    const [job] = (await api(app).claim(q)).body.jobs;
    await api(app).nack(job.id, { lease_token: job.lease_token, error: { message: 'no' }, dead: true });
    const across = await api(app).call('GET', `/v1/jobs?state=dead&queue=${q}`);
    expect(across.body.jobs.map((j: { payload_preview: string }) => j.payload_preview)).toEqual(['{"n":1}']);
    const whole = (await list(q, 'state=ready&include_payload=true')).body.jobs;
    expect(whole[0].payload).toEqual(long);
    expect(whole[0].payload_preview).toBeUndefined();
  });

  it('count=true counts the whole list, every state and a group, beside its first page', async () => {
    const q = 'i-count';
    await killAll(q, 2);
    await api(app).enqueueBatch(q, [
      ...Array.from({ length: 7 }, (_, i) => ({ payload: i, group: i < 3 ? 'g1' : 'g2' })),
      { payload: 'later', delay_ms: 60_000 },
    ]);
    const ready = await list(q, 'state=ready&limit=2&count=true');
    expect(ready.body).toMatchObject({ total: 7, total_capped: false, counted_at: expect.any(String) });
    expect(ready.body.jobs).toHaveLength(2);
    expect((await list(q, 'state=ready&group=g1&count=true')).body.total).toBe(3);
    expect((await list(q, 'state=scheduled&count=true')).body.total).toBe(1);
    expect((await list(q, 'state=dead&count=true')).body.total).toBe(2);
    expect((await list(q, 'state=claimed&count=true')).body.total).toBe(0);
    // Without it, no count is taken.
    expect((await list(q, 'state=ready')).body.total).toBeUndefined();
  });

  it('pagination returns each job exactly once while jobs are being added', async () => {
    const q = 'i-pages';
    for (let b = 0; b < 3; b++) {
      await api(app).enqueueBatch(
        q,
        Array.from({ length: 500 }, (_, i) => ({ payload: i, delay_ms: 60_000 + i * 10 })),
      );
    }
    const before = (
      await database.db.selectFrom('baton.jobs').select('id').where('queue', '=', q).execute()
    ).map((r) => r.id);
    let adding = true;
    const adder = (async () => {
      let i = 0;
      while (adding) await api(app).enqueue(q, { payload: i++, delay_ms: 1000 + (i % 7) * 100_000 });
    })();
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const res: { body: { jobs: { id: string }[]; next_cursor: string | null } } = await list(
        q,
        `state=scheduled&limit=97${cursor ? `&cursor=${cursor}` : ''}`,
      );
      seen.push(...res.body.jobs.map((j) => j.id));
      cursor = res.body.next_cursor;
    } while (cursor);
    adding = false;
    await adder;
    expect(new Set(seen).size).toBe(seen.length);
    const seenSet = new Set(seen);
    for (const id of before) expect(seenSet.has(id)).toBe(true);
  });

  it('pages finished jobs by finish time, exactly once', async () => {
    const ids = await killAll('i-dead-pages', 25);
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const res: { body: { jobs: { id: string }[]; next_cursor: string | null } } = await list(
        'i-dead-pages',
        `state=dead&limit=4&order=desc${cursor ? `&cursor=${cursor}` : ''}`,
      );
      seen.push(...res.body.jobs.map((j) => j.id));
      cursor = res.body.next_cursor;
    } while (cursor);
    expect(seen.sort()).toEqual([...ids].sort());
  });

  it.each([
    ['', 'state is required'],
    ['state=running', 'state must be equal to one of the allowed values'],
    ['state=ready&limit=501', 'limit must be <= 500'],
    ['state=ready&cursor=bm90LWEtY3Vyc29y', 'cursor is not a cursor this server issued for this state'],
    ['state=ready&cursor=WyJ4IiwieSIsInoiXQ', 'cursor is not a cursor this server issued for this state'],
  ])('rejects "%s" with a 400', async (query, detail) => {
    const res = await list('i-order', query);
    expect(res.status).toBe(400);
    expect(res.body.detail).toBe(detail);
  });

  it('a large listing does not block or slow claims: every job is still claimed exactly once', async () => {
    const q = 'i-busy';
    for (let b = 0; b < 5; b++)
      await api(app).enqueueBatch(
        q,
        Array.from({ length: 1000 }, (_, i) => ({ payload: i })),
      );
    let listing = true;
    const lister = (async () => {
      let pages = 0;
      while (listing) {
        let cursor: string | null = null;
        do {
          const res: { status: number; body: { next_cursor: string | null } } = await list(
            q,
            `state=ready&limit=500&include_payload=true${cursor ? `&cursor=${cursor}` : ''}`,
          );
          expect(res.status).toBe(200);
          cursor = res.body.next_cursor;
          pages++;
        } while (cursor && listing);
      }
      return pages;
    })();
    const claimed: string[] = [];
    const lockWaits: number[] = [];
    await Promise.all(
      Array.from({ length: 10 }, async () => {
        while (true) {
          const res = await api(app).claim(q, { max_jobs: 25 });
          if (res.body.jobs.length === 0) return;
          claimed.push(...res.body.jobs.map((j: { id: string }) => j.id));
          const waits = await sql<{ n: number }>`
            SELECT count(*)::int AS n FROM pg_stat_activity
            WHERE datname = current_database() AND wait_event_type = 'Lock'`.execute(database.db);
          lockWaits.push(waits.rows[0]!.n);
        }
      }),
    );
    listing = false;
    expect(await lister).toBeGreaterThan(0);
    expect(claimed).toHaveLength(5000);
    expect(new Set(claimed).size).toBe(5000);
    expect(Math.max(...lockWaits)).toBe(0);
  }, 60_000);
});

describe('redrive', () => {
  it('moves all dead jobs back to ready with fresh attempts; they are claimable again', async () => {
    const ids = await killAll('i-redrive', 3);
    const res = await api(app).call('POST', '/v1/queues/i-redrive/redrive', { all: true });
    expect(res.body).toEqual({ redriven: 3 });
    const again = (await api(app).claim('i-redrive', { max_jobs: 10 })).body.jobs;
    expect(again.map((j: { id: string }) => j.id).sort()).toEqual([...ids].sort());
    expect(again.every((j: { attempt: number }) => j.attempt === 1)).toBe(true);
    const job = (await api(app).get(ids[0]!)).body;
    expect(job.errors).toHaveLength(1);
  });

  it('the queue’s figures show a redrive, a bulk action and a purge at once, not at the leader’s next count', async () => {
    const q = 'i-recount';
    const ids = await killAll(q, 4);
    await refreshLiveStats(database.db);
    await refreshFinishedStats(database.db, { olderThanMs: 0 });
    const stats = async () => (await api(app).call('GET', `/v1/queues/${q}`)).body.stats;
    expect(await stats()).toMatchObject({ dead: 4, ready: 0 });
    await api(app).call('POST', `/v1/queues/${q}/redrive`, { ids: [ids[0]] });
    expect(await stats()).toMatchObject({ dead: 3, ready: 1 });
    const bulk = await api(app).call('POST', '/v1/jobs/bulk', { action: 'redrive', ids: [ids[1], ids[2]] });
    expect(bulk.status).toBe(200);
    expect(await stats()).toMatchObject({ dead: 1, ready: 3 });
    await api(app).call('POST', `/v1/queues/${q}/purge`);
    expect(await stats()).toMatchObject({ dead: 1, ready: 0, cancelled: 3 });
  });

  it('moves only the listed ids, or those dead since a time', async () => {
    const ids = await killAll('i-redrive-some', 4);
    const res = await api(app).call('POST', '/v1/queues/i-redrive-some/redrive', { ids: [ids[0], ids[2]] });
    expect(res.body.redriven).toBe(2);
    expect((await api(app).get(ids[1]!)).body.state).toBe('dead');
    await sql`UPDATE baton.job_history SET finished_at = now() - interval '2 hours' WHERE id = ${ids[1]!}`.execute(
      database.db,
    );
    const since = new Date(Date.now() - 3600_000).toISOString();
    const recent = await api(app).call('POST', '/v1/queues/i-redrive-some/redrive', { dead_since: since });
    expect(recent.body.redriven).toBe(1);
    expect((await api(app).get(ids[1]!)).body.state).toBe('dead');
    expect((await api(app).get(ids[3]!)).body.state).toBe('ready');
  });

  it('works in bounded batches and brings back a collected queue', async () => {
    const ids = await killAll('i-redrive-big', 30);
    await database.db.deleteFrom('baton.queues').where('name', '=', 'i-redrive-big').execute();
    const moved = await redriveDeadJobs(
      database.db,
      'i-redrive-big',
      { all: true },
      { autoCreate: { enabled: true, maxQueues: 1000 }, batchSize: 7 },
    );
    expect(moved).toBe(30);
    const ready = await database.db
      .selectFrom('baton.jobs')
      .select('id')
      .where('queue', '=', 'i-redrive-big')
      .execute();
    expect(ready.map((r) => r.id).sort()).toEqual([...ids].sort());
    expect((await api(app).call('GET', '/v1/queues/i-redrive-big')).body.auto_created).toBe(true);
  });

  it.each([
    [{}, 'body must give exactly one of ids, dead_since or all: true'],
    [{ all: true, ids: ['1'] }, 'body must give exactly one of ids, dead_since or all: true'],
    [{ ids: [] }, 'ids must NOT have fewer than 1 items'],
    [
      { dead_since: 'yesterday' },
      'dead_since must be an RFC 3339 date-time between 1970 and 9999, such as 2026-01-01T00:00:00Z',
    ],
  ])('rejects %j with a 400', async (body, detail) => {
    const res = await api(app).call('POST', '/v1/queues/i-redrive/redrive', body);
    expect(res.status).toBe(400);
    expect(res.body.detail).toBe(detail);
  });

  it('is 404 for a queue that neither exists nor has dead jobs', async () => {
    const res = await api(app).call('POST', '/v1/queues/i-never/redrive', { all: true });
    expect(res.status).toBe(404);
  });
});
