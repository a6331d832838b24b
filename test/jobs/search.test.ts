import { describe, expect, it } from 'vitest';
import type { BatonApp } from '../../src/app.js';
import { createTestApp, useTestApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { api } from '../support/http.js';
import { apiKeyEntry, bearer } from '../support/keys.js';

const database = useTestDatabase();
const app = useTestApp(database);

interface Listed {
  jobs: {
    id: string;
    queue: string;
    state: string;
    group: string | null;
    last_error: { message: string } | null;
  }[];
  next_cursor: string | null;
}

const search = async (query: string, on: BatonApp = app, headers: Record<string, string> = {}) => {
  const res = await on.inject({ method: 'GET', url: `/v1/jobs?${query}`, headers });
  expect(res.statusCode, res.body).toBe(200);
  return res.json() as Listed;
};

/** Enqueue jobs into `queue` and fail each once: `dead` sends them to dead, else they retry after `retryMs`. */
async function fail(
  queue: string,
  messages: string[],
  opts: { dead?: boolean; retryMs?: number; group?: string } = {},
): Promise<string[]> {
  const enq = await api(app).enqueueBatch(
    queue,
    messages.map((_, i) => ({ payload: i, ...(opts.group ? { group: opts.group } : {}) })),
  );
  expect(enq.status, JSON.stringify(enq.body)).toBe(201);
  const claimed = (await api(app).claim(queue, { max_jobs: messages.length })).body.jobs;
  expect(claimed).toHaveLength(messages.length);
  // One at a time, in enqueue order, so each later job failed later.
  for (const [i, job] of claimed.entries()) {
    const res = await api(app).nack(job.id, {
      lease_token: job.lease_token,
      error: { message: messages[i] },
      ...(opts.dead ? { dead: true } : { retry_in_ms: opts.retryMs ?? 60_000 }),
    });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
  }
  return claimed.map((j: { id: string }) => j.id);
}

describe('dead and failing jobs across queues (GET /v1/jobs)', () => {
  it('lists dead jobs of every queue newest first, paged without repeats, filtered by queue, group, error text and time', async () => {
    const a = await fail('s-mail', ['SMTP timeout', 'bad address', 'SMTP refused'], { dead: true });
    const since = new Date().toISOString();
    const b = await fail('s-pdf', ['render Timeout', 'font missing'], { dead: true, group: 'tenant:7' });
    const all = (await search('state=dead&limit=100')).jobs.filter((j) => j.queue.startsWith('s-'));
    expect(all.map((j) => j.id)).toEqual([...b].reverse().concat([...a].reverse()));
    expect(all.every((j) => j.state === 'dead')).toBe(true);

    // Pages of two follow each other: every job once.
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const page: Listed = await search(
        `state=dead&queue=s-mail&limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
      );
      seen.push(...page.jobs.map((j) => j.id));
      cursor = page.next_cursor;
    } while (cursor !== null);
    expect(seen).toEqual([...a].reverse());

    expect((await search('state=dead&error=timeout')).jobs.map((j) => j.last_error?.message)).toEqual([
      'render Timeout',
      'SMTP timeout',
    ]);
    expect((await search('state=dead&group=tenant%3A7')).jobs.map((j) => j.id)).toEqual([...b].reverse());
    expect(
      (await search(`state=dead&since=${encodeURIComponent(since)}`)).jobs
        .filter((j) => j.queue.startsWith('s-'))
        .map((j) => j.queue),
    ).toEqual(['s-pdf', 's-pdf']);
  });

  it('lists failing jobs: waiting to retry, ready again or running again, newest failure first; not those that never failed or finished', async () => {
    const later = await fail('f-a', ['first failure'], { retryMs: 60_000 });
    const again = await fail('f-b', ['second failure'], { retryMs: 0 });
    const running = await fail('f-c', ['third failure'], { retryMs: 0 });
    const reclaimed = (await api(app).claim('f-c')).body.jobs;
    expect(reclaimed.map((j: { id: string }) => j.id)).toEqual(running);
    await api(app).enqueue('f-a', { payload: 'never failed' });

    const listed = (await search('state=failing')).jobs.filter((j) => j.queue.startsWith('f-'));
    expect(listed.map((j) => [j.id, j.state])).toEqual([
      [running[0], 'claimed'],
      [again[0], 'ready'],
      [later[0], 'scheduled'],
    ]);
    expect((await search('state=failing&queue=f-b')).jobs.map((j) => j.id)).toEqual(again);
    expect((await search('state=failing&error=SECOND')).jobs.map((j) => j.id)).toEqual(again);

    // Acked on its retry: no longer failing.
    await api(app).ack(reclaimed[0].id, { lease_token: reclaimed[0].lease_token });
    expect((await search('state=failing')).jobs.map((j) => j.id)).not.toContain(running[0]);
    expect(
      (await search(`state=failing&since=${encodeURIComponent(new Date(Date.now() + 60_000).toISOString())}`))
        .jobs,
    ).toEqual([]);
  });

  it('finds the job an idempotency key created, whatever became of it, and the job holding a unique key', async () => {
    const made = await api(app).enqueue('k-orders', { payload: 1, idempotency_key: 'order-991' });
    const claimed = (await api(app).claim('k-orders')).body.jobs[0];
    await api(app).ack(claimed.id, { lease_token: claimed.lease_token });
    const byIdem = await search('idempotency_key=order-991');
    expect(byIdem.jobs.map((j) => [j.id, j.state])).toEqual([[made.body.id, 'completed']]);
    expect(byIdem.next_cursor).toBeNull();
    expect((await search('idempotency_key=order-991&queue=k-other')).jobs).toEqual([]);

    const held = await api(app).enqueue('k-docs', { payload: 2, unique_key: 'doc-7', delay_ms: 60_000 });
    expect((await search('unique_key=doc-7')).jobs.map((j) => [j.id, j.state])).toEqual([
      [held.body.id, 'scheduled'],
    ]);
    expect((await search('unique_key=no-such-key')).jobs).toEqual([]);
  });

  it('shows a key limited to some queues only the jobs of its queues, whatever it asks for', async () => {
    await fail('t-mine', ['mine broke'], { dead: true });
    const theirs = await fail('t-theirs', ['theirs broke'], { dead: true });
    await fail('t-theirs', ['theirs retry'], { retryMs: 60_000 });
    await api(app).enqueue('t-theirs', { payload: 1, idempotency_key: 'their-key' });
    const limited = await createTestApp(database, {
      BATON_API_KEYS: JSON.stringify([apiKeyEntry('limited', ['consumer'], ['t-mine'])]),
    });
    try {
      const h = bearer('limited');
      expect((await search('state=dead', limited, h)).jobs.map((j) => j.queue)).toEqual(['t-mine']);
      expect((await search('state=dead&queue=t-theirs', limited, h)).jobs).toEqual([]);
      expect((await search('state=failing', limited, h)).jobs).toEqual([]);
      expect((await search('idempotency_key=their-key', limited, h)).jobs).toEqual([]);
      expect((await search('state=dead&error=theirs', limited, h)).jobs).toEqual([]);
      // The admin sees them.
      expect((await search('state=dead&queue=t-theirs')).jobs.map((j) => j.id)).toEqual(theirs);
    } finally {
      await limited.close();
    }
  });

  it('every list takes pages of up to 500 and refuses 501 naming limit', async () => {
    const lists = [
      '/v1/jobs?state=dead&',
      '/v1/queues?',
      '/v1/queues/s-any/jobs?state=ready&',
      '/v1/workers?',
      '/v1/schedules?',
    ];
    for (const list of lists) {
      expect((await app.inject({ method: 'GET', url: `${list}limit=500` })).statusCode, list).toBe(200);
      const over = await app.inject({ method: 'GET', url: `${list}limit=501` });
      expect([over.statusCode, over.json().errors?.[0]?.field], list).toEqual([400, 'limit']);
    }
  });

  it('refuses a bad query with a 400 naming the field', async () => {
    const cases: [string, string][] = [
      ['', 'state'],
      ['state=ready', 'state'],
      ['state=dead&unique_key=a', 'state'],
      ['unique_key=a&idempotency_key=b', 'idempotency_key'],
      ['state=dead&cursor=nonsense', 'cursor'],
      ['state=dead&since=yesterday', 'since'],
      [`state=dead&error=${'x'.repeat(201)}`, 'error'],
      ['state=dead&limit=501', 'limit'],
    ];
    for (const [query, field] of cases) {
      const res = await app.inject({ method: 'GET', url: `/v1/jobs?${query}` });
      expect(res.statusCode, query).toBe(400);
      expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
      expect(res.json().errors[0].field, query).toBe(field);
    }
  });
});
