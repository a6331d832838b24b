import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { useTestApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { api } from '../support/http.js';

/**
 * Groups are served in turn (README, "Flow control"). The bound without limits: while g groups have
 * ready jobs, each gets at least a quantum q = ceil(n / 4) per turn and a turn serves at most (g + 1)
 * quanta, so a group with k ready jobs has all of them claimed within ceil(k / q) + 1 turns after they
 * arrive, however many jobs the other groups had queued before. With weights (the locked claim), a
 * group of weight w within ceil(k / w) * W jobs, plus one claim.
 */
const database = useTestDatabase();
const app = useTestApp(database);

async function claimAll(q: string, maxJobs: number, until: (claimed: { group: string | null }[]) => boolean) {
  const claimed: { id: string; group: string | null; priority: number }[] = [];
  while (!until(claimed)) {
    const jobs = (await api(app).claim(q, { max_jobs: maxJobs })).body.jobs;
    if (jobs.length === 0) throw new Error('ran dry');
    claimed.push(...jobs);
  }
  return claimed;
}

describe('fair sharing between groups', () => {
  it('claims all 100 of a small group within the first 200 jobs after it arrives behind 20,000 of a big one', async () => {
    const q = 'fair-ab';
    const client = api(app);
    for (let b = 0; b < 20; b++) {
      await client.enqueueBatch(
        q,
        Array.from({ length: 1000 }, (_, i) => ({ payload: b * 1000 + i, group: 'A' })),
      );
    }
    // A has been served for a while before B shows up.
    await claimAll(q, 10, (c) => c.length >= 50);
    await client.enqueueBatch(
      q,
      Array.from({ length: 100 }, (_, i) => ({ payload: i, group: 'B' })),
    );
    const after = await claimAll(q, 10, (c) => c.filter((j) => j.group === 'B').length === 100);
    expect(after.length).toBeLessThanOrEqual(200);
    // And A was not starved meanwhile either.
    expect(after.filter((j) => j.group === 'A').length).toBeGreaterThanOrEqual(90);
  });

  it('serves a group that arrives later among many, within its bound', async () => {
    const q = 'fair-many';
    const client = api(app);
    const jobs = Array.from({ length: 1000 }, (_, i) => ({
      payload: i,
      group: `g${String(i % 10).padStart(2, '0')}`,
    }));
    await client.enqueueBatch(q, jobs);
    await claimAll(q, 7, (c) => c.length >= 21);
    await client.enqueueBatch(
      q,
      Array.from({ length: 20 }, (_, i) => ({ payload: i, group: 'late' })),
    );
    const after = await claimAll(q, 7, (c) => c.filter((j) => j.group === 'late').length === 20);
    // 11 groups, 20 jobs, claims of 7 (a quantum of 2): within 10 + 1 turns of at most 12 quanta.
    // (First in, first out would take the 979 jobs queued before them first.)
    expect(after.length).toBeLessThanOrEqual((10 + 1) * 12 * 2);
  });

  it('gives each group its weight per round, and orders jobs by priority within a group', async () => {
    const q = 'fair-weights';
    const client = api(app);
    await client.enqueueBatch(q, [
      ...Array.from({ length: 40 }, (_, i) => ({ payload: i, group: 'heavy', priority: i === 39 ? 9 : 0 })),
      ...Array.from({ length: 40 }, (_, i) => ({ payload: i, group: 'light' })),
    ]);
    expect((await client.call('PUT', `/v1/queues/${q}/groups/heavy`, { weight: 3 })).status).toBe(200);
    const claimed = (await client.claim(q, { max_jobs: 8 })).body.jobs as {
      group: string;
      priority: number;
      payload: number;
    }[];
    expect(claimed.filter((j) => j.group === 'heavy')).toHaveLength(6);
    expect(claimed.filter((j) => j.group === 'light')).toHaveLength(2);
    // The heavy group's priority-9 job went first among its jobs.
    expect(claimed.find((j) => j.group === 'heavy')?.payload).toBe(39);
  });

  it('treats the jobs without a group as one group among the others', async () => {
    const q = 'fair-ungrouped';
    const client = api(app);
    await client.enqueueBatch(
      q,
      Array.from({ length: 50 }, (_, i) => ({ payload: i })),
    );
    await client.enqueueBatch(
      q,
      Array.from({ length: 50 }, (_, i) => ({ payload: i, group: 'x' })),
    );
    const claimed = (await client.claim(q, { max_jobs: 10 })).body.jobs as { group: string | null }[];
    expect(claimed.filter((j) => j.group === null)).toHaveLength(5);
    expect(claimed.filter((j) => j.group === 'x')).toHaveLength(5);
  });

  it('fills a claim from the groups that have jobs when others run short', async () => {
    const q = 'fair-short';
    const client = api(app);
    await client.enqueueBatch(q, [
      { payload: 1, group: 'one' },
      ...Array.from({ length: 30 }, (_, i) => ({ payload: i, group: 'many' })),
    ]);
    const claimed = (await client.claim(q, { max_jobs: 10 })).body.jobs;
    expect(claimed).toHaveLength(10);
  });

  it('skips a paused group and serves the rest', async () => {
    const q = 'fair-paused';
    const client = api(app);
    await client.enqueueBatch(q, [
      ...Array.from({ length: 5 }, (_, i) => ({ payload: i, group: 'stop' })),
      ...Array.from({ length: 5 }, (_, i) => ({ payload: i, group: 'go' })),
    ]);
    await client.call('PUT', `/v1/queues/${q}/groups/stop`, { paused: true });
    const claimed = (await client.claim(q, { max_jobs: 10 })).body.jobs as { group: string }[];
    expect(claimed.map((j) => j.group)).toEqual(Array(5).fill('go'));
    const { rows } = await sql<{ n: number }>`
      SELECT count(*)::int AS n FROM baton.jobs WHERE queue = ${q} AND group_key = 'stop' AND state = 'ready'`.execute(
      database.db,
    );
    expect(rows[0]!.n).toBe(5);
  });
});
