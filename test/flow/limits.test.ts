import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import type { BatonApp } from '../../src/app.js';
import { useTestReplicas } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { api } from '../support/http.js';

/**
 * Flow-control limits are exact across replicas: three apps over one database, thirty claimers.
 * Each test checks its limit three ways: a sampler counting claimed jobs in the table while the
 * claimers run, the jobs' own claimed_at and finished_at (database times) after, and a ledger of
 * when each claimer held each job by its own clock.
 */
const database = useTestDatabase();
const replicas = useTestReplicas(database, 3);

interface Held {
  id: string;
  group: string | null;
  from: number;
  to: number;
}

/** 30 claimers (10 per replica) claim up to `maxJobs` at a time, hold each job `holdMs`, ack; until `total` acked. */
async function drain(queue: string, total: number, opts: { maxJobs?: number; holdMs?: number } = {}) {
  const ledger: Held[] = [];
  let acked = 0;
  const errors: unknown[] = [];
  const claimer = async (app: BatonApp) => {
    const client = api(app);
    while (acked < total) {
      const res = await client.claim(queue, { max_jobs: opts.maxJobs ?? 2, wait_ms: 500, lease_ms: 60_000 });
      if (res.status !== 200) errors.push(res.body);
      const from = Date.now();
      await Promise.all(
        (res.body.jobs ?? []).map(async (job: { id: string; group: string | null; lease_token: string }) => {
          await new Promise((r) => setTimeout(r, opts.holdMs ?? 5));
          const to = Date.now();
          const ack = await client.ack(job.id, { lease_token: job.lease_token });
          if (ack.status !== 200) errors.push(ack.body);
          ledger.push({ id: job.id, group: job.group, from, to });
          acked++;
        }),
      );
    }
  };
  await Promise.all(replicas.flatMap((app) => Array.from({ length: 10 }, () => claimer(app))));
  expect(errors).toEqual([]);
  return ledger;
}

/** Most intervals overlapping at any instant (an interval's start is where the count peaks). */
function maxOverlap(intervals: { from: number; to: number }[]): number {
  const events = intervals.flatMap((i) => [
    [i.from, 1],
    [i.to, -1],
  ]);
  // An end at the same instant as a start comes first: [from, to) intervals.
  events.sort((a, b) => a[0]! - b[0]! || a[1]! - b[1]!);
  let now = 0;
  let max = 0;
  for (const [, d] of events) {
    now += d!;
    max = Math.max(max, now);
  }
  return max;
}

/** Claimed jobs per queue (and per group) read from the table every few ms while `work` runs. */
async function sampled<T>(queue: string, work: Promise<T>) {
  let done = false;
  let maxQueue = 0;
  let maxGroup = 0;
  let samples = 0;
  const sampler = (async () => {
    while (!done) {
      const { rows } = await sql<{ group_key: string; n: number }>`
        SELECT group_key, count(*)::int AS n FROM baton.jobs
        WHERE queue = ${queue} AND state = 'claimed' GROUP BY group_key`.execute(database.db);
      maxQueue = Math.max(
        maxQueue,
        rows.reduce((sum, r) => sum + r.n, 0),
      );
      maxGroup = Math.max(maxGroup, ...rows.map((r) => r.n));
      samples++;
      await new Promise((r) => setTimeout(r, 2));
    }
  })();
  const result = await work.finally(() => {
    done = true;
  });
  await sampler;
  return { result, maxQueue, maxGroup, samples };
}

/** The jobs' claim and finish times by the database clock, in ms. */
async function dbIntervals(queue: string) {
  const { rows } = await sql<{ group_key: string; from: number; to: number }>`
    SELECT group_key, extract(epoch FROM claimed_at) * 1000 AS from, extract(epoch FROM finished_at) * 1000 AS to
    FROM baton.job_history WHERE queue = ${queue} AND state = 'completed'`.execute(database.db);
  return rows.map((r) => ({ group: r.group_key, from: Number(r.from), to: Number(r.to) }));
}

const byGroup = <T extends { group: string | null }>(rows: T[]) => {
  const out = new Map<string | null, T[]>();
  for (const r of rows) out.set(r.group, [...(out.get(r.group) ?? []), r]);
  return out;
};

describe('flow-control limits across three replicas and thirty claimers', () => {
  it('never has more jobs of a queue claimed than its concurrency_limit, and still drains', async () => {
    const q = 'fl-conc';
    expect((await api(replicas[0]!).call('PUT', `/v1/queues/${q}`, { concurrency_limit: 5 })).status).toBe(
      201,
    );
    await api(replicas[0]!).enqueueBatch(
      q,
      Array.from({ length: 300 }, (_, i) => ({ payload: i })),
    );
    const { result: ledger, maxQueue, samples } = await sampled(q, drain(q, 300, { maxJobs: 3 }));
    expect(ledger).toHaveLength(300);
    expect(new Set(ledger.map((h) => h.id)).size).toBe(300);
    expect(samples).toBeGreaterThan(20);
    expect(maxQueue).toBeLessThanOrEqual(5);
    expect(maxQueue).toBe(5); // it reached the limit: the limit, not the claimers, set the pace
    expect(maxOverlap(ledger)).toBeLessThanOrEqual(5);
    expect(maxOverlap(await dbIntervals(q))).toBeLessThanOrEqual(5);
  });

  it('never has more jobs of any group claimed than group_concurrency_limit, with many groups', async () => {
    const q = 'fl-group-conc';
    await api(replicas[0]!).call('PUT', `/v1/queues/${q}`, { group_concurrency_limit: 2 });
    const jobs = Array.from({ length: 400 }, (_, i) => ({ payload: i, group: `tenant-${i % 20}` }));
    await api(replicas[0]!).enqueueBatch(q, jobs);
    const { result: ledger, maxGroup } = await sampled(q, drain(q, 400, { maxJobs: 4 }));
    expect(ledger).toHaveLength(400);
    expect(maxGroup).toBeLessThanOrEqual(2);
    for (const [group, held] of byGroup(ledger))
      expect(maxOverlap(held), String(group)).toBeLessThanOrEqual(2);
    const intervals = await dbIntervals(q);
    for (const [group, held] of byGroup(intervals))
      expect(maxOverlap(held), String(group)).toBeLessThanOrEqual(2);
    // Twenty groups at two each: more than one group's worth ran at once.
    expect(maxOverlap(intervals)).toBeGreaterThan(2);
  });

  it('holds a group limit and the queue limit together (a group is counted only when its limit can bind)', async () => {
    const q = 'fl-both-conc';
    await api(replicas[0]!).call('PUT', `/v1/queues/${q}`, {
      concurrency_limit: 12,
      group_concurrency_limit: 5,
    });
    const jobs = Array.from({ length: 300 }, (_, i) => ({ payload: i, group: `g${i % 3}` }));
    await api(replicas[0]!).enqueueBatch(q, jobs);
    const { result: ledger, maxQueue, maxGroup } = await sampled(q, drain(q, 300, { maxJobs: 2 }));
    expect(ledger).toHaveLength(300);
    expect(maxQueue).toBeLessThanOrEqual(12);
    expect(maxGroup).toBeLessThanOrEqual(5);
    const intervals = await dbIntervals(q);
    expect(maxOverlap(intervals)).toBeLessThanOrEqual(12);
    for (const [group, held] of byGroup(intervals))
      expect(maxOverlap(held), String(group)).toBeLessThanOrEqual(5);
    // Three groups at five each, under twelve: the queue limit was reached, not only the groups'.
    expect(maxOverlap(intervals)).toBeGreaterThan(5);
  });

  it('holds group limits on jobs without a group (one group of their own), then on grouped jobs that arrive', async () => {
    const q = 'fl-blank-group';
    await api(replicas[0]!).call('PUT', `/v1/queues/${q}`, {
      concurrency_limit: 50,
      group_concurrency_limit: 3,
      group_rate_limit: { limit: 1000, period_ms: 1000 },
    });
    await api(replicas[0]!).enqueueBatch(
      q,
      Array.from({ length: 150 }, (_, i) => ({ payload: i })),
    );
    const late = (async () => {
      await new Promise((r) => setTimeout(r, 150));
      await api(replicas[1]!).enqueueBatch(
        q,
        Array.from({ length: 60 }, (_, i) => ({ payload: i, group: `g${i % 2}` })),
      );
    })();
    const { result: ledger, maxGroup } = await sampled(q, drain(q, 210, { maxJobs: 3 }));
    await late;
    expect(ledger).toHaveLength(210);
    expect(maxGroup).toBeLessThanOrEqual(3);
    const intervals = await dbIntervals(q);
    for (const [group, held] of byGroup(intervals))
      expect(maxOverlap(held), JSON.stringify(group)).toBeLessThanOrEqual(3);
    // The no-group group did run three at once (the limit was reached, not just never exceeded).
    expect(maxOverlap(intervals.filter((i) => i.group === ''))).toBe(3);
  });

  it('never claims more than rate_limit.limit jobs in any window of period_ms', async () => {
    const q = 'fl-rate';
    await api(replicas[0]!).call('PUT', `/v1/queues/${q}`, { rate_limit: { limit: 15, period_ms: 500 } });
    await api(replicas[0]!).enqueueBatch(
      q,
      Array.from({ length: 60 }, (_, i) => ({ payload: i })),
    );
    const started = Date.now();
    const ledger = await drain(q, 60, { maxJobs: 4, holdMs: 1 });
    expect(ledger).toHaveLength(60);
    const { rows } = await sql<{ t: number }>`
      SELECT extract(epoch FROM claimed_at) * 1000 AS t FROM baton.job_history WHERE queue = ${q}
      ORDER BY claimed_at`.execute(database.db);
    const times = rows.map((r) => Number(r.t));
    for (const t of times) {
      const inWindow = times.filter((u) => u > t - 500 && u <= t).length;
      expect(inWindow).toBeLessThanOrEqual(15);
    }
    // 60 jobs at 15 per 500 ms take at least three more windows after the first.
    expect(times.at(-1)! - times[0]!).toBeGreaterThanOrEqual(1500);
    expect(Date.now() - started).toBeLessThan(15_000);
  });

  it('never claims more than a group’s own rate limit, while other groups go on', async () => {
    const q = 'fl-group-rate';
    const client = api(replicas[0]!);
    await client.call('PUT', `/v1/queues/${q}`, { group_rate_limit: { limit: 5, period_ms: 400 } });
    await client.call('PUT', `/v1/queues/${q}/groups/fast`, { rate_limit: null });
    expect(
      (
        await client.call('PUT', `/v1/queues/${q}/groups/fast`, {
          rate_limit: { limit: 1000, period_ms: 400 },
        })
      ).status,
    ).toBe(200);
    const jobs = [
      ...Array.from({ length: 20 }, (_, i) => ({ payload: i, group: 'slow' })),
      ...Array.from({ length: 100 }, (_, i) => ({ payload: i, group: 'fast' })),
    ];
    await client.enqueueBatch(q, jobs);
    await drain(q, 120, { maxJobs: 5, holdMs: 1 });
    const { rows } = await sql<{ g: string; t: number }>`
      SELECT group_key AS g, extract(epoch FROM claimed_at) * 1000 AS t FROM baton.job_history
      WHERE queue = ${q}`.execute(database.db);
    const slow = rows.filter((r) => r.g === 'slow').map((r) => Number(r.t));
    const fast = rows.filter((r) => r.g === 'fast').map((r) => Number(r.t));
    for (const t of slow) expect(slow.filter((u) => u > t - 400 && u <= t).length).toBeLessThanOrEqual(5);
    // The fast group was not held to the slow group's pace: it finished before the slow one.
    expect(Math.max(...fast)).toBeLessThan(Math.max(...slow));
  });
});
