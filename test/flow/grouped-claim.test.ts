import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import type { BatonApp } from '../../src/app.js';
import { claimJobs } from '../../src/jobs/claim/claim.js';
import { quantumOf } from '../../src/jobs/claim/grouped.js';
import { useTestReplicas } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { api } from '../support/http.js';

/**
 * The grouped claim without limits (src/jobs/claim/grouped.ts): one statement that visits groups in
 * turn, a quantum of ceil(n / 4) jobs each. Its turn, and exactly-once claims from three replicas.
 */
const database = useTestDatabase();
const replicas = useTestReplicas(database, 3);

const claim = (queue: string, maxJobs: number) =>
  claimJobs(database.db, { queue, maxJobs, leaseMs: 60_000, defaultLeaseMs: 30_000 });

/** `perGroup` jobs in each of `groups`, enqueued through the API (so the queue is marked grouped). */
async function seed(queue: string, groups: string[], perGroup: number) {
  const jobs = groups.flatMap((group) => Array.from({ length: perGroup }, (_, i) => ({ payload: i, group })));
  for (let i = 0; i < jobs.length; i += 1000) {
    expect((await api(replicas[0]!).enqueueBatch(queue, jobs.slice(i, i + 1000))).status).toBe(201);
  }
}

const counts = (jobs: { group_key: string }[]) => {
  const out: Record<string, number> = {};
  for (const j of jobs) out[j.group_key] = (out[j.group_key] ?? 0) + 1;
  return out;
};

describe('the grouped claim', () => {
  it('takes a quantum of ceil(n / 4) from each group in turn, and resumes a group the last claim cut short', async () => {
    const q = 'turn-quantum';
    await seed(q, ['a', 'b', 'c', 'd', 'e', 'f'], 10);
    expect(quantumOf(10)).toBe(3);
    // a, b and c give their quantum of 3; d gives 1 before the claim is full.
    expect(counts(await claim(q, 10))).toEqual({ a: 3, b: 3, c: 3, d: 1 });
    // So the turn stays with d: it gets a whole quantum now, then e and f, then a again.
    expect(counts(await claim(q, 10))).toEqual({ d: 3, e: 3, f: 3, a: 1 });
    // A claim of one visits one group: the turn goes on from a.
    expect(counts(await claim(q, 1))).toEqual({ a: 1 });
    expect(counts(await claim(q, 1))).toEqual({ b: 1 });
  });

  it('wraps round to the first group and, with few groups, splits the claim between them', async () => {
    const q = 'turn-wrap';
    await seed(q, ['x', 'y'], 20);
    // Two groups: each gives its quantum of 3, then one at a time in turn.
    expect(counts(await claim(q, 10))).toEqual({ x: 5, y: 5 });
    expect(counts(await claim(q, 10))).toEqual({ x: 5, y: 5 });
    // One group left with jobs: it fills the claim alone.
    await claim(q, 10);
    await sql`DELETE FROM baton.jobs WHERE queue = ${q} AND group_key = 'x'`.execute(database.db);
    expect(counts(await claim(q, 10))).toEqual({ y: 5 });
  });

  it('orders jobs by priority within a group, and skips expired jobs', async () => {
    const q = 'turn-priority';
    const client = api(replicas[0]!);
    await client.enqueueBatch(q, [
      { payload: 'low', group: 'g' },
      { payload: 'high', group: 'g', priority: 5 },
      { payload: 'gone', group: 'g', priority: 9, expires_in_ms: 1 },
      { payload: 'other', group: 'h' },
    ]);
    await new Promise((r) => setTimeout(r, 20));
    const jobs = await claim(q, 2);
    expect(jobs.map((j) => JSON.parse(j.payload_json)).sort()).toEqual(['high', 'other']);
  });

  it('obeys limits set after the queue was claimed as grouped, from the next claim on', async () => {
    const q = 'turn-then-limited';
    await seed(q, ['a', 'b', 'c'], 10);
    expect(await claim(q, 3)).toHaveLength(3);
    const client = api(replicas[1]!);
    expect((await client.call('PUT', `/v1/queues/${q}`, { concurrency_limit: 5 })).status).toBe(200);
    // 3 claimed already: 2 more at most.
    expect(await claim(q, 10)).toHaveLength(2);
    expect((await client.call('PUT', `/v1/queues/${q}`, { concurrency_limit: null })).status).toBe(200);
    expect(await claim(q, 10)).toHaveLength(10);
  });

  it('claims each job exactly once from three replicas, thirty claimers, a thousand groups, and drains', async () => {
    const q = 'turn-replicas';
    const groups = Array.from({ length: 1000 }, (_, i) => `t${String(i).padStart(4, '0')}`);
    await seed(q, groups, 6);
    const seen = new Map<string, number>();
    const errors: unknown[] = [];
    let empty = 0;
    const claimer = async (app: BatonApp, maxJobs: number) => {
      const client = api(app);
      while (empty < 30) {
        const res = await client.claim(q, { max_jobs: maxJobs, lease_ms: 60_000 });
        if (res.status !== 200) {
          errors.push(res.body);
          return;
        }
        const jobs = res.body.jobs as { id: string; lease_token: string }[];
        if (jobs.length === 0) empty++;
        for (const job of jobs) {
          seen.set(job.id, (seen.get(job.id) ?? 0) + 1);
          const ack = await client.ack(job.id, { lease_token: job.lease_token });
          if (ack.status !== 200) errors.push(ack.body);
        }
      }
    };
    await Promise.all(
      replicas.flatMap((app) => Array.from({ length: 10 }, (_, i) => claimer(app, 1 + (i % 4) * 5))),
    );
    expect(errors).toEqual([]);
    expect(seen.size).toBe(6000);
    expect([...seen.values()].every((n) => n === 1)).toBe(true);
    const { rows } = await sql<{ n: number }>`
      SELECT count(*)::int AS n FROM baton.job_history WHERE queue = ${q} AND state = 'completed'`.execute(
      database.db,
    );
    expect(rows[0]!.n).toBe(6000);
  });
});
