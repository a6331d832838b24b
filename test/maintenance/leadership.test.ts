import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import type { BatonApp } from '../../src/app.js';
import { Leadership } from '../../src/maintenance/leadership.js';
import { createTestApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { api } from '../support/http.js';
import { until } from '../support/until.js';

const database = useTestDatabase();
const TICK = 1000;
/** What a loaded machine adds to a timer and a round trip (up to ~130 ms seen in full runs). */
const SLACK = 300;

describe('leadership', () => {
  it('one of many contenders leads; the others wait for the lease to expire', async () => {
    const contenders = Array.from(
      { length: 6 },
      (_, i) => new Leadership(database.db, `c${i}`, 60_000, 'test-1'),
    );
    const results = await Promise.all(contenders.map((c) => c.tryLead()));
    expect(results.filter(Boolean)).toHaveLength(1);
    const leader = contenders[results.indexOf(true)]!;
    expect(await leader.tryLead()).toBe(true);
    const other = contenders.find((c) => c !== leader)!;
    expect(await other.tryLead()).toBe(false);
    await sql`UPDATE baton.leader SET expires_at = now() - interval '1 ms' WHERE name = 'test-1'`.execute(
      database.db,
    );
    expect(await other.tryLead()).toBe(true);
    expect(await leader.tryLead()).toBe(false);
    const row = await database.db
      .selectFrom('baton.leader')
      .selectAll()
      .where('name', '=', 'test-1')
      .executeTakeFirstOrThrow();
    expect(row.holder).toBe(other.holder);
    expect(row.term).toBe('2');
  });

  it('resigning hands over at once', async () => {
    const a = new Leadership(database.db, 'a', 60_000, 'test-2');
    const b = new Leadership(database.db, 'b', 60_000, 'test-2');
    expect(await a.tryLead()).toBe(true);
    expect(await b.tryLead()).toBe(false);
    await a.resign();
    expect(a.isLeader).toBe(false);
    expect(await b.tryLead()).toBe(true);
  });

  it('two servers: exactly one leads; stop it and the other leads within a quarter tick; expired leases keep coming back', async () => {
    const env = { BATON_MAINTENANCE: 'true', BATON_TICK_MS: String(TICK), BATON_PROMOTE_INTERVAL_MS: '100' };
    const servers: BatonApp[] = [await createTestApp(database, env), await createTestApp(database, env)];
    const leaders = () => servers.filter((s) => s.maintainer?.isLeader);
    try {
      await until(() => leaders().length === 1, 3 * TICK);
      const first = leaders()[0]!;
      const second = servers.find((s) => s !== first)!;
      // Hold it a while: never two leaders, never a moment without one longer than a tick (a renewal
      // every quarter tick; a lease lapses only when one is 3/4 of a tick late), and the lease never
      // changes hands.
      const held = () =>
        database.db.selectFrom('baton.leader').select(['holder', 'term']).where('name', '=', 'maintenance');
      const lease = await held().executeTakeFirstOrThrow();
      expect(lease.holder).toBe(first.maintainer!.leadership.holder);
      let leaderlessSince: number | undefined;
      let longestGap = 0;
      for (const end = Date.now() + 3 * TICK; Date.now() < end; ) {
        await new Promise((r) => setTimeout(r, TICK / 20));
        const now = leaders().length;
        expect(now).toBeLessThanOrEqual(1);
        expect(second.maintainer!.isLeader).toBe(false);
        if (now === 0) leaderlessSince ??= Date.now();
        else if (leaderlessSince !== undefined) {
          longestGap = Math.max(longestGap, Date.now() - leaderlessSince);
          leaderlessSince = undefined;
        }
      }
      if (leaderlessSince !== undefined) longestGap = Math.max(longestGap, Date.now() - leaderlessSince);
      expect(longestGap).toBeLessThan(TICK);
      expect(await held().executeTakeFirstOrThrow()).toEqual(lease);
      await until(() => first.maintainer!.isLeader, TICK);
      expect(await first.metrics.registry.getSingleMetricAsString('baton_leader')).toMatch(/baton_leader 1/);
      expect(await second.metrics.registry.getSingleMetricAsString('baton_leader')).toMatch(/baton_leader 0/);

      // An expired lease comes back under the first leader...
      const expireOne = async (queue: string) => {
        await api(second).enqueue(queue, { payload: 1 });
        const [job] = (await api(second).claim(queue)).body.jobs;
        await sql`UPDATE baton.jobs SET lease_expires_at = now() - interval '1 ms' WHERE id = ${job.id}`.execute(
          database.db,
        );
        return job.id as string;
      };
      const before = await expireOne('lead-a');
      await until(async () => (await api(second).get(before)).body.state === 'ready', 3 * TICK);

      // ...the leader stops (graceful: it resigns) and the other takes over at its next attempt...
      await first.close();
      servers.splice(servers.indexOf(first), 1);
      // Resigned: the other takes the lease at its next attempt, a quarter tick away at most.
      const takeover = await until(() => second.maintainer!.isLeader, 2 * TICK);
      expect(takeover).toBeLessThanOrEqual(TICK / 4 + SLACK);

      // ...and expired leases keep coming back.
      const after = await expireOne('lead-b');
      await until(async () => (await api(second).get(after)).body.state === 'ready', 3 * TICK);
    } finally {
      await Promise.all(servers.map((s) => s.close()));
    }
  });

  it('a leader that dies without resigning is replaced within a tick and a quarter', async () => {
    // The dead leader: took the lease at tick length and then never renewed (as after SIGKILL).
    await database.db.deleteFrom('baton.leader').execute();
    const dead = new Leadership(database.db, 'killed', TICK);
    expect(await dead.tryLead()).toBe(true);
    // It renews while the survivor starts (a server's start-up, slow on a loaded machine, is not
    // what is measured), then renews once more and dies.
    let alive = true;
    const renewing = (async () => {
      while (alive) {
        await dead.tryLead();
        await new Promise((r) => setTimeout(r, TICK / 5));
      }
    })();
    const survivor = await createTestApp(database, {
      BATON_MAINTENANCE: 'true',
      BATON_TICK_MS: String(TICK),
    });
    alive = false;
    await renewing;
    const diedAt = Date.now();
    expect(await dead.tryLead()).toBe(true);
    try {
      await until(() => survivor.maintainer!.isLeader, 3 * TICK);
      // Its lease (one tick) plus the survivor's next attempt (a quarter tick), plus what a busy
      // machine adds to a timer and a round trip; a survivor that missed an attempt would be a
      // quarter tick later still.
      expect(Date.now() - diedAt).toBeLessThanOrEqual(TICK + TICK / 4 + SLACK);
      const row = await database.db.selectFrom('baton.leader').selectAll().executeTakeFirstOrThrow();
      expect(row.holder).toBe(survivor.maintainer!.leadership.holder);
    } finally {
      await survivor.close();
    }
  });
});
