import { describe, expect, it } from 'vitest';
import { claimForGroup } from '../../src/jobs/claim/claim.js';
import type { Claimant } from '../../src/jobs/claim/types.js';
import { useTestApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { api } from '../support/http.js';

/**
 * The limited claim in one statement (src/jobs/claim/limited.ts): the budget from baton.flow_budget,
 * what it answers when a limit holds a claim back, and how claims move between the plain, limited and
 * walk statements as a queue's limits change.
 */
const database = useTestDatabase();
const app = useTestApp(database);

const claimFor = (queue: string, claimants: Claimant[]) =>
  claimForGroup(database.db, queue, 30_000, claimants).then((outcomes) =>
    outcomes.map((o) => ({ jobs: o.jobs.length, heldBack: o.heldBack })),
  );

async function limitedQueue(queue: string, settings: Record<string, unknown>, jobs: number) {
  const client = api(app);
  expect((await client.call('PUT', `/v1/queues/${queue}`, settings)).status).toBe(201);
  expect(
    (
      await client.enqueueBatch(
        queue,
        Array.from({ length: jobs }, (_, i) => ({ payload: i })),
      )
    ).status,
  ).toBe(201);
}

describe('the limited claim', () => {
  it('deals a budget to claimants in order, and says only of those it cut short why', async () => {
    await limitedQueue('lc-deal', { concurrency_limit: 3 }, 5);
    expect(await claimFor('lc-deal', [{ maxJobs: 2 }, { maxJobs: 2 }])).toEqual([
      { jobs: 2, heldBack: undefined },
      { jobs: 1, heldBack: { reason: 'concurrency' } },
    ]);
  });

  it('records its claim in the rate window it read, so the next claim sees it and is told when to retry', async () => {
    await limitedQueue('lc-rate', { rate_limit: { limit: 5, period_ms: 60_000 } }, 10);
    expect(await claimFor('lc-rate', [{ maxJobs: 3 }])).toEqual([{ jobs: 3, heldBack: undefined }]);
    // Room for 2 more: a claim of 5 gets them (and returns at once, so no retry time).
    expect(await claimFor('lc-rate', [{ maxJobs: 5 }])).toEqual([{ jobs: 2, heldBack: { reason: 'rate' } }]);
    // The window is full: nothing, and when the first claim's bucket leaves the window.
    const [third] = await claimFor('lc-rate', [{ maxJobs: 5 }]);
    expect(third!.jobs).toBe(0);
    expect(third!.heldBack?.reason).toBe('rate');
    expect(third!.heldBack?.retryAfterMs).toBeGreaterThan(55_000);
    expect(third!.heldBack?.retryAfterMs).toBeLessThanOrEqual(60_600);
  });

  it('stops applying a limit removed elsewhere from the next claim on, and the queue goes back to the plain claim', async () => {
    await limitedQueue('lc-removed', { concurrency_limit: 2 }, 10);
    expect(await claimFor('lc-removed', [{ maxJobs: 5 }])).toEqual([
      { jobs: 2, heldBack: { reason: 'concurrency' } },
    ]);
    expect((await api(app).call('PUT', '/v1/queues/lc-removed', { concurrency_limit: null })).status).toBe(
      200,
    );
    expect(await claimFor('lc-removed', [{ maxJobs: 5 }])).toEqual([{ jobs: 5, heldBack: undefined }]);
    expect(await claimFor('lc-removed', [{ maxJobs: 5 }])).toEqual([{ jobs: 3, heldBack: undefined }]);
  });

  it('claims nothing from a paused queue, and does not count that as held back by a limit', async () => {
    await limitedQueue('lc-paused', { concurrency_limit: 5, paused: true }, 3);
    expect(await claimFor('lc-paused', [{ maxJobs: 2 }])).toEqual([{ jobs: 0, heldBack: undefined }]);
    expect((await api(app).call('PUT', '/v1/queues/lc-paused', { paused: false })).status).toBe(200);
    expect(await claimFor('lc-paused', [{ maxJobs: 2 }])).toEqual([{ jobs: 2, heldBack: undefined }]);
  });

  it('holds the no-group group to the group limits, then walks the groups once grouped jobs arrive', async () => {
    await limitedQueue('lc-blank', { group_concurrency_limit: 2 }, 4);
    expect(await claimFor('lc-blank', [{ maxJobs: 4 }])).toEqual([
      { jobs: 2, heldBack: { reason: 'group_concurrency' } },
    ]);
    await api(app).enqueueBatch('lc-blank', [
      { payload: 'a1', group: 'a' },
      { payload: 'a2', group: 'a' },
      { payload: 'a3', group: 'a' },
    ]);
    // The no-group group is full; group a gives its limit of 2.
    const [outcome] = await claimForGroup(database.db, 'lc-blank', 30_000, [{ maxJobs: 4 }]);
    expect(outcome!.jobs.map((j) => j.group_key)).toEqual(['a', 'a']);
  });
});
