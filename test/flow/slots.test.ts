import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BatonApp } from '../../src/app.js';
import { releaseClaims } from '../../src/jobs/claim/release.js';
import { rearmExpiredLeases } from '../../src/maintenance/rearm.js';
import { createTestApp, useTestApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { api } from '../support/http.js';

/**
 * A concurrency slot comes back on every path out of `claimed`, and a claim that a limit holds back
 * long-polls like an empty one: woken when a slot frees (on any replica) or when a rate window has
 * room, not by polling. The long-poll fallback is set to a minute here, so a claim that returns in
 * time was woken.
 */
const database = useTestDatabase();
const app = useTestApp(database, { BATON_POLL_INTERVAL_MS: '60000' });
let other: BatonApp;
beforeAll(async () => {
  other = await createTestApp(database, { BATON_POLL_INTERVAL_MS: '60000' });
});
afterAll(async () => {
  await other.close();
});

/** A queue with concurrency_limit 1 and two ready jobs, the first claimed: the next claim is held back. */
async function limitedWithOneClaimed(q: string, lease_ms = 60_000) {
  const client = api(app);
  await client.call('PUT', `/v1/queues/${q}`, { concurrency_limit: 1 });
  await client.enqueueBatch(q, [{ payload: 1 }, { payload: 2 }]);
  const [held] = (await client.claim(q, { lease_ms })).body.jobs;
  expect((await client.claim(q)).body.jobs).toEqual([]);
  return held as { id: string; lease_token: string };
}

const claimOne = async (q: string) => (await api(app).claim(q)).body.jobs as { id: string }[];

describe('a concurrency slot comes back', () => {
  it('on ack', async () => {
    const held = await limitedWithOneClaimed('sl-ack');
    await api(app).ack(held.id, { lease_token: held.lease_token });
    expect(await claimOne('sl-ack')).toHaveLength(1);
  });

  it('on nack, retried at once or later', async () => {
    for (const retry_in_ms of [0, 60_000]) {
      const q = `sl-nack-${retry_in_ms}`;
      const held = await limitedWithOneClaimed(q);
      await api(app).nack(held.id, { lease_token: held.lease_token, retry_in_ms });
      expect(await claimOne(q)).toHaveLength(1);
    }
  });

  it('on nack to dead, and the redriven job counts again once claimed', async () => {
    const q = 'sl-dead';
    const held = await limitedWithOneClaimed(q);
    await api(app).nack(held.id, { lease_token: held.lease_token, dead: true });
    const [second] = await claimOne(q);
    expect(second).toBeDefined();
    await api(app).call('POST', `/v1/queues/${q}/redrive`, { all: true });
    // The redriven job is ready, but the slot is taken by the second job.
    expect(await claimOne(q)).toEqual([]);
    await api(app).cancel(second!.id);
    expect((await claimOne(q))[0]?.id).toBe(held.id);
  });

  it('on cancel', async () => {
    const held = await limitedWithOneClaimed('sl-cancel');
    await api(app).cancel(held.id);
    expect(await claimOne('sl-cancel')).toHaveLength(1);
  });

  it('when a crashed worker’s lease expires, and no sooner', async () => {
    const q = 'sl-crash';
    const held = await limitedWithOneClaimed(q, 1000);
    // Re-arm before expiry changes nothing: the slot is still the crashed worker's.
    expect((await rearmExpiredLeases(database.db, 100)).total).toBe(0);
    expect(await claimOne(q)).toEqual([]);
    await sql`UPDATE baton.jobs SET lease_expires_at = now() - interval '1 ms' WHERE id = ${held.id}`.execute(
      database.db,
    );
    // Expired but not yet re-armed: the job is still claimed, so the slot is still taken.
    expect(await claimOne(q)).toEqual([]);
    expect((await rearmExpiredLeases(database.db, 100)).ready.get(q)).toBe(1);
    expect(await claimOne(q)).toHaveLength(1);
  });

  it('when a claim given back by a long-poll whose client left is released', async () => {
    const q = 'sl-release';
    const held = await limitedWithOneClaimed(q);
    expect(await releaseClaims(database.db, [held])).toBe(1);
    expect((await claimOne(q))[0]?.id).toBe(held.id);
  });
});

describe('group limits', () => {
  it('hold even while the queue is not marked grouped (a mark skipped, or jobs redriven in)', async () => {
    const q = 'sl-unmarked';
    const client = api(app);
    await client.call('PUT', `/v1/queues/${q}`, { group_concurrency_limit: 1 });
    await client.enqueueBatch(q, [
      { payload: 1, group: 'a' },
      { payload: 2, group: 'a' },
      { payload: 3, group: 'b' },
    ]);
    await sql`UPDATE baton.queues SET grouped = false WHERE name = ${q}`.execute(database.db);
    const claimed = (await client.claim(q, { max_jobs: 3 })).body.jobs as { group: string }[];
    expect(claimed.map((j) => j.group).sort()).toEqual(['a', 'b']);
  });
});

describe('a held-back claim long-polls', () => {
  it('and is woken by an ack on another replica', async () => {
    const q = 'sl-wake';
    const held = await limitedWithOneClaimed(q);
    const started = Date.now();
    const waiting = api(other).claim(q, { wait_ms: 20_000 });
    await new Promise((r) => setTimeout(r, 300));
    await api(app).ack(held.id, { lease_token: held.lease_token });
    const res = await waiting;
    expect(res.body.jobs).toHaveLength(1);
    expect(Date.now() - started).toBeLessThan(10_000);
  });

  it('and is woken when the rate window has room again', async () => {
    const q = 'sl-rate';
    const client = api(app);
    await client.call('PUT', `/v1/queues/${q}`, { rate_limit: { limit: 2, period_ms: 1500 } });
    await client.enqueueBatch(q, [{ payload: 1 }, { payload: 2 }, { payload: 3 }]);
    expect((await client.claim(q, { max_jobs: 3 })).body.jobs).toHaveLength(2);
    const started = Date.now();
    const res = await client.claim(q, { wait_ms: 20_000 });
    expect(res.body.jobs).toHaveLength(1);
    const waited = Date.now() - started;
    expect(waited).toBeGreaterThan(1000);
    expect(waited).toBeLessThan(10_000);
  });

  it('and is woken when its group is resumed', async () => {
    const q = 'sl-paused';
    const client = api(app);
    await client.enqueue(q, { payload: 1, group: 'g1' });
    await client.call('PUT', `/v1/queues/${q}/groups/g1`, { paused: true });
    expect((await client.claim(q)).body.jobs).toEqual([]);
    const waiting = api(other).claim(q, { wait_ms: 20_000 });
    await new Promise((r) => setTimeout(r, 300));
    await client.call('PUT', `/v1/queues/${q}/groups/g1`, { paused: false });
    expect((await waiting).body.jobs).toHaveLength(1);
  });

  it('counts held-back claims by queue and reason in /metrics', async () => {
    const q = 'sl-metrics';
    await limitedWithOneClaimed(q);
    const text = (await app.inject({ method: 'GET', url: '/metrics' })).body;
    expect(text).toMatch(
      new RegExp(`baton_claims_held_back_total\\{queue="${q}",reason="concurrency"\\} [1-9]`),
    );
    expect(text).toMatch(/baton_claims_held_back_total\{queue="sl-paused",reason="group_paused"\} [1-9]/);
  });
});
