import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import type { BatonApp } from '../../src/app.js';
import { rearmExpiredLeases } from '../../src/maintenance/rearm.js';
import { useTestApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { apiKeyEntry, bearer } from '../support/keys.js';

/**
 * A tenant's fan-out hurts only its sender (docs/security.md, "A fan-out or a cascade"). The release
 * of a parent's children runs after its finish commits, a thousand children per short transaction
 * (migration 0019), so neither the parent's ack, nor the shared ack group, nor the leader's re-arm
 * waits for it. The app runs with a 2 s statement timeout: before, the release of 150,000 children
 * was one statement inside the root's ack (about 5 s on a quiet machine), which this test would see
 * as the root's ack answering 503 and the re-arm failing.
 */
const KEYS = JSON.stringify([
  apiKeyEntry('honest', ['producer', 'consumer'], ['a-*']),
  apiKeyEntry('hostile', ['producer', 'consumer'], ['b-*']),
  apiKeyEntry('admin', ['admin', 'producer', 'consumer']),
]);

const database = useTestDatabase();
const app = useTestApp(database, { BATON_API_KEYS: KEYS, BATON_STATEMENT_TIMEOUT_MS: '2000' });

function as(who: string, target: BatonApp = app) {
  return async (method: 'GET' | 'POST' | 'DELETE', url: string, payload?: object) => {
    const res = await target.inject({ method, url, headers: bearer(who), ...(payload ? { payload } : {}) });
    return { status: res.statusCode, body: res.body ? res.json() : undefined };
  };
}
const honest = as('honest');
const hostile = as('hostile');
const admin = as('admin');

/** Where each job of `ids` is now: one row per table it is found in. */
async function placesOf(queue: string) {
  const { rows } = await sql<{ place: string; n: number; distinct_ids: number }>`
    SELECT place, count(*)::int AS n, count(DISTINCT id)::int AS distinct_ids FROM (
      SELECT 'ready' AS place, id FROM baton.jobs WHERE queue = ${queue} AND state = 'ready'
      UNION ALL SELECT 'claimed', id FROM baton.jobs WHERE queue = ${queue} AND state = 'claimed'
      UNION ALL SELECT 'waiting', id FROM baton.waiting_jobs WHERE queue = ${queue}
      UNION ALL SELECT 'scheduled', id FROM baton.scheduled_jobs WHERE queue = ${queue}
      UNION ALL SELECT h.state, h.id FROM baton.job_history h WHERE queue = ${queue}) x
    GROUP BY place`.execute(database.db);
  return Object.fromEntries(rows.map((r) => [r.place, r.n]));
}

/** `n` children of `root` in `queue`, a thousand per request. */
async function fanOut(queue: string, root: string, n: number) {
  for (let done = 0; done < n; done += 1000) {
    const jobs = Array.from({ length: Math.min(1000, n - done) }, (_, i) => ({
      payload: done + i,
      depends_on: [root],
    }));
    const res = await hostile('POST', `/v1/queues/${queue}/jobs/batch`, { jobs });
    expect(res.status).toBe(201);
  }
}

/** Honest traffic until `stop` says so: enqueue, claim, ack, one job at a time; every status kept. */
async function honestTraffic(stop: () => boolean) {
  const statuses: number[] = [];
  let acked = 0;
  while (!stop()) {
    const enq = await honest('POST', '/v1/queues/a-work/jobs', { payload: { n: acked } });
    statuses.push(enq.status);
    const claim = await honest('POST', '/v1/queues/a-work/claim', { max_jobs: 1 });
    statuses.push(claim.status);
    const job = claim.body?.jobs?.[0];
    if (!job) continue;
    const ack = await honest('POST', `/v1/jobs/${job.id}/ack`, { lease_token: job.lease_token });
    statuses.push(ack.status);
    if (ack.status === 200) acked++;
  }
  return { statuses, acked };
}

describe('a fan-out hurts only its sender', () => {
  it("150,000 children released in steps beside honest acks, while another tenant's crashed job is re-armed", async () => {
    const root = await hostile('POST', '/v1/queues/b-import/jobs', { payload: 'root' });
    expect(root.status).toBe(201);
    await fanOut('b-import', root.body.id, 150_000);
    expect(await placesOf('b-import')).toEqual({ ready: 1, waiting: 150_000 });

    // The honest tenant's worker claims a job with a short lease and dies.
    await honest('POST', '/v1/queues/a-crash/jobs', { payload: 'lost worker' });
    const crashed = (await honest('POST', '/v1/queues/a-crash/claim', { lease_ms: 1000 })).body.jobs[0];
    expect(crashed).toBeDefined();

    let releasing = true;
    const traffic = honestTraffic(() => !releasing);
    try {
      const claim = await hostile('POST', '/v1/queues/b-import/claim', { max_jobs: 1 });
      const ack = await hostile('POST', `/v1/jobs/${root.body.id}/ack`, {
        lease_token: claim.body.jobs[0].lease_token,
      });
      // The root's ack costs what any ack costs: it files the root and one event, nothing per child.
      expect(ack.status).toBe(200);

      // The crashed job's lease runs out while the children are being released: the re-arm, which
      // every tenant's crash recovery waits for, runs to the end and brings it back.
      await new Promise((resolve) => setTimeout(resolve, 1100));
      const rearmed = await rearmExpiredLeases(database.db, 1000);
      expect(rearmed.ready.get('a-crash')).toBe(1);
      const again = await honest('POST', '/v1/queues/a-crash/claim', {});
      expect(again.body.jobs.map((j: { id: string }) => j.id)).toEqual([crashed.id]);
    } finally {
      releasing = false;
    }
    const counts = await app.releaser.drain(120_000);
    const { statuses, acked } = await traffic;
    expect(acked).toBeGreaterThan(0);
    expect(statuses.filter((s) => s >= 500)).toEqual([]);

    // Every child released exactly once: ready, each in one row.
    expect(counts.released).toBeLessThanOrEqual(150_000);
    expect(await placesOf('b-import')).toEqual({ completed: 1, ready: 150_000 });
    const { rows } = await sql<{ n: number }>`
      SELECT count(*)::int AS n FROM baton.job_edges
      WHERE parent = ${root.body.id}::bigint AND parent_outcome = 'completed'`.execute(database.db);
    expect(rows[0]!.n).toBe(150_000);
  }, 240_000);

  it("a root whose lease runs out dies by the re-arm, which other tenants' recovery needs, and its graph is cancelled in steps", async () => {
    const root = await hostile('POST', '/v1/queues/b-graph/jobs', { payload: 'root', max_attempts: 1 });
    await fanOut('b-graph', root.body.id, 20_000);
    // A second level under the first child: the cascade goes on, an event per cancelled parent.
    const first = (await hostile('GET', '/v1/queues/b-graph/jobs?state=waiting&limit=1')).body.jobs[0];
    for (let k = 0; k < 2; k++) {
      const grand = await hostile('POST', '/v1/queues/b-graph/jobs/batch', {
        jobs: Array.from({ length: 1000 }, (_, i) => ({ payload: i, depends_on: [first.id] })),
      });
      expect(grand.status).toBe(201);
    }
    await honest('POST', '/v1/queues/a-crash/jobs', { payload: 'lost worker' });
    const crashed = (await honest('POST', '/v1/queues/a-crash/claim', { lease_ms: 1000 })).body.jobs[0];
    // The hostile worker claims the root and dies too.
    expect((await hostile('POST', '/v1/queues/b-graph/claim', { lease_ms: 1000 })).body.jobs[0].id).toBe(
      root.body.id,
    );

    let cascading = true;
    const traffic = honestTraffic(() => !cascading);
    try {
      await new Promise((resolve) => setTimeout(resolve, 1100));
      const rearmed = await rearmExpiredLeases(database.db, 1000);
      expect(rearmed.ready.get('a-crash')).toBe(1);
      expect(rearmed.deadIds).toEqual([root.body.id]);
      const again = await honest('POST', '/v1/queues/a-crash/claim', {});
      expect(again.body.jobs.map((j: { id: string }) => j.id)).toEqual([crashed.id]);
    } finally {
      cascading = false;
    }
    await app.releaser.drain(120_000);
    const { statuses } = await traffic;
    expect(statuses.filter((s) => s >= 500)).toEqual([]);
    expect(await placesOf('b-graph')).toEqual({ dead: 1, cancelled: 22_000 });
  }, 240_000);

  it('an admin cancelling the root of a large graph cancels it all, in steps', async () => {
    const root = await hostile('POST', '/v1/queues/b-big/jobs', { payload: 'root', delay_ms: 3_600_000 });
    await fanOut('b-big', root.body.id, 20_000);
    const cancel = await admin('POST', `/v1/jobs/${root.body.id}/cancel`);
    expect(cancel.status).toBe(200);
    expect(cancel.body.state).toBe('cancelled');
    await app.releaser.drain(120_000);
    expect(await placesOf('b-big')).toEqual({ cancelled: 20_001 });
    const { rows } = await sql<{ n: number }>`
      SELECT count(*)::int AS n FROM baton.job_history
      WHERE queue = 'b-big' AND last_error->>'reason' = 'parent_failed'`.execute(database.db);
    expect(rows[0]!.n).toBe(20_000);
  }, 240_000);
  it('a forced delete of a queue holding a 20,000-child graph cancels it in steps', async () => {
    const root = await hostile('POST', '/v1/queues/b-gone/jobs', { payload: 'root', delay_ms: 3_600_000 });
    await fanOut('b-gone', root.body.id, 20_000);
    const gone = await admin('DELETE', '/v1/queues/b-gone?force=true');
    expect(gone.status).toBe(200);
    await app.releaser.drain(120_000);
    expect(await placesOf('b-gone')).toEqual({ cancelled: 20_001 });
  }, 240_000);
});
