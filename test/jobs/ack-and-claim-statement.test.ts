import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { type AckAndClaimItem, ackAndClaimEach } from '../../src/jobs/claim/ack-and-claim.js';
import { useTestApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { api } from '../support/http.js';

/**
 * The ack and the claim of `next` in one statement (src/jobs/claim/ack-and-claim.ts), called directly: what
 * it acks and claims, and what it leaves to the ack and claim paths. The HTTP behaviour of `next`
 * (test/jobs/ack-and-claim.test.ts) runs through it as well.
 */
const database = useTestDatabase();
const app = useTestApp(database);
const LEASE = 30_000;

async function enqueue(queue: string, payloads: unknown[], priority = 0) {
  const res = await api(app).enqueueBatch(
    queue,
    payloads.map((payload) => ({ payload, priority })),
  );
  expect(res.status).toBe(201);
}

async function claimOne(queue: string) {
  const [job] = (await api(app).claim(queue, { max_jobs: 1 })).body.jobs;
  return { id: job.id as string, leaseToken: job.lease_token as string };
}

const next = (maxJobs: number, more: Partial<AckAndClaimItem['next']> = {}) => ({ maxJobs, ...more });

async function stateOf(id: string) {
  return (await api(app).get(id)).body.state as string;
}

describe('ack and claim in one statement', () => {
  it("acks each item and claims its next jobs from the acked job's own queue, in claim order", async () => {
    await enqueue('as-a', ['a0']);
    await enqueue('as-b', ['b0']);
    const a = await claimOne('as-a');
    const b = await claimOne('as-b');
    await enqueue('as-a', ['a1', 'a2', 'a3']);
    await enqueue('as-a', ['a-urgent'], 5);
    await enqueue('as-b', ['b1']);

    const [outA, outB] = await ackAndClaimEach(database.db, LEASE, [
      { ...a, resultJson: '{"ok":1}', next: next(2, { leaseMs: 5_000, workerId: 'w-a' }) },
      { ...b, next: next(3) },
    ]);
    expect(outA!.job).toMatchObject({ id: a.id, state: 'completed', result: { ok: 1 } });
    expect(outB!.job).toMatchObject({ id: b.id, state: 'completed' });
    expect(await stateOf(a.id)).toBe('completed');

    // a: the urgent job first, then the oldest; under the item's lease and worker id.
    expect(outA!.next.map((j) => j.payload_json)).toEqual(['"a-urgent"', '"a1"']);
    expect(outA!.next.every((j) => j.queue === 'as-a' && j.attempts === 1)).toBe(true);
    const leaseA = outA!.next[0]!.lease_expires_at.getTime() - outA!.next[0]!.claimed_at.getTime();
    expect(leaseA).toBe(5_000);
    const row = await database.db
      .selectFrom('baton.jobs')
      .select(['state', 'worker_id', 'lease_token'])
      .where('id', '=', outA!.next[0]!.id)
      .executeTakeFirstOrThrow();
    expect(row).toEqual({ state: 'claimed', worker_id: 'w-a', lease_token: outA!.next[0]!.lease_token });
    // b: all its queue had (one), under the default lease.
    expect(outB!.next.map((j) => j.payload_json)).toEqual(['"b1"']);
    expect(outB!.next[0]!.lease_expires_at.getTime() - outB!.next[0]!.claimed_at.getTime()).toBe(LEASE);
  });

  it('deals one queue among several items in item order, each up to its max_jobs', async () => {
    await enqueue('as-deal', ['x', 'y']);
    const first = await claimOne('as-deal');
    const second = await claimOne('as-deal');
    await enqueue(
      'as-deal',
      Array.from({ length: 4 }, (_, i) => `n${i}`),
    );
    const [one, two] = await ackAndClaimEach(database.db, LEASE, [
      { ...first, next: next(3) },
      { ...second, next: next(3) },
    ]);
    expect(one!.next.map((j) => j.payload_json)).toEqual(['"n0"', '"n1"', '"n2"']);
    expect(two!.next.map((j) => j.payload_json)).toEqual(['"n3"']);
  });

  it('a lost lease acks and claims nothing for that item, and the others go through', async () => {
    await enqueue('as-lost', ['j0', 'j1', 'j2']);
    const stale = await claimOne('as-lost');
    const good = await claimOne('as-lost');
    const [lost, ok] = await ackAndClaimEach(database.db, LEASE, [
      { id: stale.id, leaseToken: '00000000-0000-4000-8000-000000000000', next: next(5) },
      { ...good, next: next(5) },
    ]);
    expect(lost).toEqual({ job: undefined, next: [] });
    expect(await stateOf(stale.id)).toBe('claimed');
    expect(ok!.job?.id).toBe(good.id);
    expect(ok!.next.map((j) => j.payload_json)).toEqual(['"j2"']);
  });

  it('leaves paused and flow-controlled queues to the claim path: acked, nothing claimed', async () => {
    await enqueue('as-paused', ['p0']);
    await enqueue('as-limited', ['l0']);
    const paused = await claimOne('as-paused');
    const limited = await claimOne('as-limited');
    await enqueue('as-paused', ['p1']);
    await enqueue('as-limited', ['l1']);
    expect((await api(app).call('PUT', '/v1/queues/as-paused', { paused: true })).status).toBe(200);
    expect((await api(app).call('PUT', '/v1/queues/as-limited', { concurrency_limit: 1 })).status).toBe(200);
    const outs = await ackAndClaimEach(database.db, LEASE, [
      { ...paused, next: next(1) },
      { ...limited, next: next(1) },
    ]);
    expect(outs.map((o) => [o.job?.state, o.next.length])).toEqual([
      ['completed', 0],
      ['completed', 0],
    ]);
    const { rows } = await sql<{ n: string }>`
      SELECT count(*) AS n FROM baton.jobs WHERE queue IN ('as-paused', 'as-limited') AND state = 'claimed'`.execute(
      database.db,
    );
    expect(rows[0]!.n).toBe('0');
  });

  it('the same ack twice in one statement is acked once; the second finds nothing', async () => {
    await enqueue('as-twice', ['t0', 't1', 't2']);
    const job = await claimOne('as-twice');
    const outs = await ackAndClaimEach(database.db, LEASE, [
      { ...job, next: next(1) },
      { ...job, next: next(1) },
    ]);
    expect(outs.filter((o) => o.job !== undefined)).toHaveLength(2);
    // Both items name the same lease: both see the job completed, and it is claimed for once.
    const claimed = outs.flatMap((o) => o.next);
    expect(new Set(claimed.map((j) => j.id)).size).toBe(claimed.length);
    expect(claimed.length).toBeLessThanOrEqual(1);
  });

  it('through the route: the ack and the next job commit in one transaction, one commit per job', async () => {
    await enqueue('as-route', ['r0', 'r1']);
    const job = await claimOne('as-route');
    const res = await api(app).ack(job.id, { lease_token: job.leaseToken, next: { max_jobs: 1 } });
    expect(res.status).toBe(200);
    expect(res.body.next.map((j: { payload: string }) => j.payload)).toEqual(['r1']);
    const { rows } = await sql<{ acked: string; claimed: string }>`
      SELECT (SELECT xmin::text FROM baton.job_history WHERE id = ${job.id}) AS acked,
             (SELECT xmin::text FROM baton.jobs WHERE id = ${res.body.next[0].id}) AS claimed`.execute(
      database.db,
    );
    expect(rows[0]!.claimed).toBe(rows[0]!.acked);
  });

  it('racing statements and plain claims never hand one job to two leases', async () => {
    const q = 'as-race';
    await enqueue(
      q,
      Array.from({ length: 400 }, (_, i) => i),
    );
    const seen = new Map<string, number>();
    const note = (ids: string[]) => {
      for (const id of ids) seen.set(id, (seen.get(id) ?? 0) + 1);
    };
    // 8 workers ack-and-claim in one statement each; 4 others claim plainly and ack alone.
    const worker = async () => {
      const { jobs } = (await api(app).claim(q, { max_jobs: 1 })).body;
      let hand: { id: string; leaseToken: string }[] = jobs.map((j: { id: string; lease_token: string }) => ({
        id: j.id,
        leaseToken: j.lease_token,
      }));
      note(hand.map((j) => j.id));
      while (hand.length > 0) {
        const [out] = await ackAndClaimEach(database.db, LEASE, [{ ...hand[0]!, next: next(2) }]);
        expect(out!.job?.id).toBe(hand[0]!.id);
        const more = out!.next.map((j) => ({ id: j.id, leaseToken: j.lease_token }));
        note(more.map((j) => j.id));
        hand = [...hand.slice(1), ...more];
      }
    };
    const plain = async () => {
      for (;;) {
        const { jobs } = (await api(app).claim(q, { max_jobs: 3 })).body;
        if (jobs.length === 0) return;
        note(jobs.map((j: { id: string }) => j.id));
        const res = await api(app).ackBatch(
          jobs.map((j: { id: string; lease_token: string }) => ({ id: j.id, lease_token: j.lease_token })),
        );
        expect(res.body.acked).toBe(jobs.length);
      }
    };
    await Promise.all([...Array.from({ length: 8 }, worker), ...Array.from({ length: 4 }, plain)]);
    expect(seen.size).toBe(400);
    expect([...seen.values()].every((n) => n === 1)).toBe(true);
    const { rows } = await sql<{ n: string; once: string }>`
      SELECT count(*) AS n, count(*) FILTER (WHERE attempts = 1) AS once
      FROM baton.job_history WHERE queue = ${q} AND state = 'completed'`.execute(database.db);
    expect(rows[0]).toEqual({ n: '400', once: '400' });
  });
});
