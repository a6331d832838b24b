import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { expireJobs } from '../../src/maintenance/expiry.js';
import { forgetEdgesOfGoneJobs } from '../../src/maintenance/job-edges.js';
import { refreshLiveStats } from '../../src/maintenance/queue-stats.js';
import { rearmExpiredLeases } from '../../src/maintenance/rearm.js';
import { createTestApp, useTestApp, useTestReplicas } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { api } from '../support/http.js';
import { apiKeyEntry, bearer } from '../support/keys.js';

const database = useTestDatabase();
const app = useTestApp(database);
const replicas = useTestReplicas(database, 2);

/** Claim one job of `queue` and ack it with `result`; fails the test when nothing is claimable. */
async function runOne(queue: string, result: unknown = null) {
  await released();
  const claimed = await api(app).claim(queue);
  const job = claimed.body.jobs[0];
  if (!job) throw new Error(`nothing to claim in ${queue}`);
  const ack = await api(app).ack(job.id, { lease_token: job.lease_token, result });
  expect(ack.status).toBe(200);
  return job as { id: string; lease_token: string; payload: unknown };
}

/**
 * Children are released after their parent's finish commits, in steps (migration 0019): wait until
 * every pending release is done, on any replica, before looking at a child.
 */
const released = () => app.releaser.drain();

const stateOf = async (id: string) => {
  await released();
  return (await api(app).get(id)).body.state as string;
};

/** Every job claimed so far (ids), for "no child before its parents" checks. */
async function claimAll(queue: string, max = 1000) {
  await released();
  const claimed = await api(app).claim(queue, { max_jobs: max });
  return claimed.body.jobs as { id: string; lease_token: string; payload: any }[];
}

describe('job dependencies', () => {
  it('a diamond A → B, C → D: D waits for both, then reads both results', async () => {
    const q = 'deps-diamond';
    const enq = await api(app).enqueueBatch(q, [
      { payload: 'A' },
      { payload: 'B', depends_on: [{ item: 0 }] },
      { payload: 'C', depends_on: [{ item: 0 }] },
      { payload: 'D', depends_on: [{ item: 1 }, { item: 2 }] },
    ]);
    expect(enq.status).toBe(201);
    const [a, b, c, d] = enq.body.jobs.map((j: { id: string }) => j.id);
    expect(enq.body.jobs.map((j: { state: string }) => j.state)).toEqual([
      'ready',
      'waiting',
      'waiting',
      'waiting',
    ]);

    // Only A is claimable.
    const first = await claimAll(q);
    expect(first.map((j) => j.id)).toEqual([a]);
    await api(app).ack(a, { lease_token: first[0]!.lease_token, result: { from: 'A' } });
    expect(await stateOf(b)).toBe('ready');
    expect(await stateOf(d)).toBe('waiting');

    const middle = await claimAll(q);
    expect(middle.map((j) => j.id).sort()).toEqual([b, c].sort());
    await api(app).ack(middle[0]!.id, {
      lease_token: middle[0]!.lease_token,
      result: { from: middle[0]!.payload },
    });
    expect(await stateOf(d)).toBe('waiting');
    expect((await api(app).get(d)).body.dependencies).toMatchObject({ parents: 2, parents_pending: 1 });
    await api(app).ack(middle[1]!.id, {
      lease_token: middle[1]!.lease_token,
      result: { from: middle[1]!.payload },
    });

    const last = await claimAll(q);
    expect(last.map((j) => j.id)).toEqual([d]);
    const parents = await api(app).call('GET', `/v1/jobs/${d}/parents`);
    expect(parents.status).toBe(200);
    expect(parents.body.jobs).toEqual([
      expect.objectContaining({
        id: b,
        state: 'completed',
        parent_outcome: 'completed',
        result: { from: 'B' },
      }),
      expect.objectContaining({
        id: c,
        state: 'completed',
        parent_outcome: 'completed',
        result: { from: 'C' },
      }),
    ]);
    const children = await api(app).call('GET', `/v1/jobs/${a}/children`);
    expect(children.body.jobs.map((j: { id: string }) => j.id)).toEqual([b, c]);
  });

  it('depends_on an existing id: completed is met, unknown is a 400 naming the field, items only earlier', async () => {
    const q = 'deps-ids';
    const done = await api(app).enqueue(q, { payload: 1 });
    await runOne(q);
    const child = await api(app).enqueue(q, { payload: 2, depends_on: [done.body.id] });
    expect(child.status).toBe(201);
    expect(child.body.state).toBe('ready');

    const unknown = await api(app).enqueue(q, { payload: 3, depends_on: ['999999999'] });
    expect(unknown.status).toBe(400);
    expect(JSON.stringify(unknown.body)).toContain('depends_on[0]');

    const forward = await api(app).enqueueBatch(q, [{ payload: 1, depends_on: [{ item: 0 }] }]);
    expect(forward.status).toBe(400);
    expect(JSON.stringify(forward.body)).toContain('jobs[0].depends_on[0].item');

    const single = await api(app).enqueue(q, { payload: 1, depends_on: [{ item: 0 }] });
    expect(single.status).toBe(400);
    const policyAlone = await api(app).enqueue(q, { payload: 1, on_parent_failure: 'run' });
    expect(policyAlone.status).toBe(400);
    expect(JSON.stringify(policyAlone.body)).toContain('on_parent_failure');
  });

  it('a graph sent again with its idempotency keys creates nothing; a new child of a keyed item waits for its job', async () => {
    const q = 'deps-keys';
    const graph = [
      { payload: 'a', idempotency_key: 'a' },
      { payload: 'b', idempotency_key: 'b', depends_on: [{ item: 0 }] },
      { payload: 'c', idempotency_key: 'c', depends_on: [{ item: 0 }, { item: 1 }] },
    ];
    const first = await api(app).enqueueBatch(q, graph);
    expect(first.status, JSON.stringify(first.body)).toBe(201);
    const again = await api(app).enqueueBatch(q, graph);
    expect(again.body.jobs.map((j: { id: string }) => j.id)).toEqual(
      first.body.jobs.map((j: { id: string }) => j.id),
    );
    expect(again.body.jobs.map((j: { created: boolean }) => j.created)).toEqual([false, false, false]);
    // The same keys with a new item naming a keyed one: that item stands for its existing job.
    const more = await api(app).enqueueBatch(q, [
      ...graph.slice(0, 2),
      { payload: 'd', depends_on: [{ item: 1 }] },
    ]);
    expect(more.status).toBe(201);
    const d = more.body.jobs[2];
    expect(d).toMatchObject({ created: true, state: 'waiting' });
    const parents = await api(app).call('GET', `/v1/jobs/${d.id}/parents`);
    expect(parents.body.jobs.map((j: { id: string }) => j.id)).toEqual([first.body.jobs[1].id]);
    const { rows } = await sql<{ n: number }>`
      SELECT (SELECT count(*) FROM baton.jobs WHERE queue = ${q})::int
           + (SELECT count(*) FROM baton.waiting_jobs WHERE queue = ${q})::int AS n`.execute(database.db);
    expect(rows[0]!.n).toBe(4);
  });

  it('a graph whose idempotency key outlived its job takes the key over, as a plain enqueue does', async () => {
    // The prune's clock saw the key expire and removed the job; this enqueue's still sees it live.
    const q = 'deps-keys-gone';
    const first = await api(app).enqueueBatch(q, [
      { payload: 'a', idempotency_key: 'a' },
      { payload: 'b', depends_on: [{ item: 0 }] },
    ]);
    expect(first.status).toBe(201);
    await sql`DELETE FROM baton.jobs WHERE id = ${first.body.jobs[0].id}::bigint`.execute(database.db);
    const graph = [
      { payload: 'a2', idempotency_key: 'a' },
      { payload: 'b2', depends_on: [{ item: 0 }] },
    ];
    const again = await api(app).enqueueBatch(q, graph);
    expect(again.status, JSON.stringify(again.body)).toBe(201);
    expect(again.body.jobs.map((j: { created: boolean }) => j.created)).toEqual([true, true]);
    expect(again.body.jobs[0].id).not.toBe(first.body.jobs[0].id);
    // The key names the new job from now on: the same graph again creates only its unkeyed child.
    const third = await api(app).enqueueBatch(q, graph);
    expect(third.body.jobs[0]).toMatchObject({ id: again.body.jobs[0].id, created: false });
  });

  it('an idempotency key claimed by an item a waiting job answers (its unique key) names that job', async () => {
    const q = 'deps-keys-unique';
    const holder = await api(app).enqueueBatch(q, [
      { payload: 'p' },
      { payload: 'held', unique_key: 'u', depends_on: [{ item: 0 }] },
    ]);
    const waiting = holder.body.jobs[1];
    const graph = [
      { payload: 'p2' },
      { payload: 'x', idempotency_key: 'k', unique_key: 'u', depends_on: [{ item: 0 }] },
      { payload: 'y', idempotency_key: 'k', depends_on: [{ item: 0 }] },
    ];
    const sent = await api(app).enqueueBatch(q, graph);
    expect(sent.status, JSON.stringify(sent.body)).toBe(201);
    // The keyed item and the one repeating its key both answer the waiting job that holds the unique key.
    expect(sent.body.jobs.slice(1).map((j: { id: string; created: boolean }) => [j.id, j.created])).toEqual([
      [waiting.id, false],
      [waiting.id, false],
    ]);
    const { rows } = await sql<{ job_id: string }>`
      SELECT job_id::text FROM baton.idempotency_keys WHERE queue = ${q} AND key = 'k'`.execute(database.db);
    expect(rows.map((r) => r.job_id)).toEqual([waiting.id]);
    const again = await api(app).enqueueBatch(q, graph);
    expect(again.body.jobs[1]).toMatchObject({ id: waiting.id, created: false });
  });

  it('a waiting child holds its unique key: keep answers it, replace changes it in place, claimed frees it', async () => {
    const q = 'deps-unique';
    const enq = await api(app).enqueueBatch(q, [
      { payload: 'p' },
      { payload: { rev: 1 }, unique_key: 'report', depends_on: [{ item: 0 }] },
    ]);
    const child = enq.body.jobs[1];
    expect(child).toMatchObject({ state: 'waiting', unique_key: 'report' });

    const keep = await api(app).enqueue(q, { payload: { rev: 2 }, unique_key: 'report' });
    expect(keep.status).toBe(200);
    expect(keep.body).toMatchObject({ id: child.id, state: 'waiting' });
    const replace = await api(app).enqueue(q, {
      payload: { rev: 3 },
      unique_key: 'report',
      on_conflict: 'replace',
    });
    expect(replace.status).toBe(200);
    expect(replace.body).toMatchObject({ id: child.id, state: 'waiting' });
    const again = await api(app).enqueueBatch(q, [
      { payload: { rev: 4 }, unique_key: 'report', depends_on: [enq.body.jobs[0].id] },
    ]);
    expect(again.body.jobs[0]).toMatchObject({ id: child.id, created: false });

    await runOne(q);
    const [claimed] = await claimAll(q);
    expect(claimed).toMatchObject({ id: child.id, payload: { rev: 3 } });
    const fresh = await api(app).enqueue(q, { payload: { rev: 5 }, unique_key: 'report' });
    expect(fresh.status).toBe(201);
    expect(fresh.body.id).not.toBe(child.id);
  });

  it('fan-out of 1,000 then a 1,000-way fan-in', async () => {
    const q = 'deps-fan';
    const root = await api(app).enqueue(q, { payload: 'root' });
    const fan = await api(app).enqueueBatch(
      q,
      Array.from({ length: 1000 }, (_, i) => ({ payload: i, depends_on: [root.body.id] })),
    );
    expect(fan.status).toBe(201);
    const ids: string[] = fan.body.jobs.map((j: { id: string }) => j.id);
    const sink = await api(app).enqueue(q, { payload: 'sink', depends_on: ids });
    expect(sink.status).toBe(201);
    expect(sink.body.state).toBe('waiting');

    await runOne(q);
    const claimed = await claimAll(q);
    expect(claimed).toHaveLength(1000);
    expect(claimed.some((j) => j.id === sink.body.id)).toBe(false);
    const acks = await api(app).ackBatch(
      claimed.map((j) => ({ id: j.id, lease_token: j.lease_token, result: j.payload })),
    );
    expect(acks.status).toBe(200);
    const last = await claimAll(q);
    expect(last.map((j) => j.id)).toEqual([sink.body.id]);

    // The fan-in reads its parents' results page by page.
    const seen: unknown[] = [];
    let cursor: string | null = null;
    do {
      const page: any = await api(app).call(
        'GET',
        `/v1/jobs/${sink.body.id}/parents?limit=100${cursor ? `&cursor=${cursor}` : ''}`,
      );
      expect(page.status).toBe(200);
      seen.push(...page.body.jobs.map((j: { result: unknown }) => j.result));
      cursor = page.body.next_cursor;
    } while (cursor);
    expect(seen.sort((x, y) => Number(x) - Number(y))).toEqual(Array.from({ length: 1000 }, (_, i) => i));
  });

  it('the last parents acked at the same instant on two replicas promote the child exactly once', async () => {
    for (let round = 0; round < 20; round++) {
      const q = `deps-race-${round}`;
      // Two parents in even rounds (the issue's case), six in odd ones: all acked at once.
      const parents = round % 2 === 0 ? 2 : 6;
      const enq = await api(app).enqueueBatch(q, [
        ...Array.from({ length: parents }, (_, i) => ({ payload: `p${i}` })),
        { payload: 'child', depends_on: Array.from({ length: parents }, (_, item) => ({ item })) },
      ]);
      const child = enq.body.jobs[parents].id as string;
      const claimed = await claimAll(q);
      expect(claimed).toHaveLength(parents);
      const acks = await Promise.all(
        claimed.map((job, i) => api(replicas[i % 2]!).ack(job.id, { lease_token: job.lease_token })),
      );
      expect(acks.map((a) => a.status)).toEqual(claimed.map(() => 200));
      await released();
      const { rows } = await sql<{ n: number }>`
        SELECT ((SELECT count(*) FROM baton.jobs WHERE id = ${child}::bigint)
              + (SELECT count(*) FROM baton.scheduled_jobs WHERE id = ${child}::bigint)
              + (SELECT count(*) FROM baton.waiting_jobs WHERE id = ${child}::bigint)
              + (SELECT count(*) FROM baton.job_history WHERE id = ${child}::bigint))::int AS n`.execute(
        database.db,
      );
      expect(rows[0]!.n).toBe(1);
      expect(await stateOf(child)).toBe('ready');
      expect((await claimAll(q)).map((j) => j.id)).toEqual([child]);
    }
  });

  it('two replicas releasing parents that share 2,500 children at once: each child moves once, ready', async () => {
    for (let round = 0; round < 3; round++) {
      const q = `deps-shared-${round}`;
      const parents = await api(app).enqueueBatch(
        q,
        Array.from({ length: 4 }, (_, i) => ({ payload: `p${i}`, priority: 10 })),
      );
      const parentIds: string[] = parents.body.jobs.map((j: { id: string }) => j.id);
      for (let k = 0; k < 5; k++) {
        const children = await api(app).enqueueBatch(
          q,
          Array.from({ length: 500 }, (_, i) => ({ payload: k * 500 + i, depends_on: parentIds })),
        );
        expect(children.status).toBe(201);
      }
      const claimed = await claimAll(q);
      expect(claimed.map((j) => j.id).sort()).toEqual([...parentIds].sort());
      // Each replica acks two parents; both replicas' releasers then step through the four events at
      // once, each step decrementing counters of children the other steps share.
      const acks = await Promise.all(
        claimed.map((job, i) => api(replicas[i % 2]!).ack(job.id, { lease_token: job.lease_token })),
      );
      expect(acks.map((a) => a.status)).toEqual([200, 200, 200, 200]);
      await Promise.all(replicas.map((r) => r.releaser.drain()));
      const { rows } = await sql<{ place: string; n: number; ids: number }>`
        SELECT place, count(*)::int AS n, count(DISTINCT id)::int AS ids FROM (
          SELECT 'ring' AS place, id FROM baton.jobs WHERE queue = ${q} AND state = 'ready'
          UNION ALL SELECT 'waiting', id FROM baton.waiting_jobs WHERE queue = ${q}
          UNION ALL SELECT 'scheduled', id FROM baton.scheduled_jobs WHERE queue = ${q}
          UNION ALL SELECT state, id FROM baton.job_history WHERE queue = ${q}) x
        GROUP BY place ORDER BY place`.execute(database.db);
      expect(rows).toEqual([
        { place: 'completed', n: 4, ids: 4 },
        { place: 'ring', n: 2500, ids: 2500 },
      ]);
      const edges = await sql<{ open: number }>`
        SELECT count(*) FILTER (WHERE parent_outcome IS DISTINCT FROM 'completed')::int AS open
        FROM baton.job_edges WHERE parent = ANY(${parentIds}::bigint[])`.execute(database.db);
      expect(edges.rows[0]!.open).toBe(0);
    }
  });

  it('a child enqueued while its parent is being acked on another replica never waits forever', async () => {
    for (let round = 0; round < 30; round++) {
      const q = `deps-enqueue-race-${round}`;
      const parent = await api(app).enqueue(q, { payload: 'p' });
      const [job] = await claimAll(q);
      const [child, ack] = await Promise.all([
        api(replicas[0]!).enqueue(q, { payload: 'c', depends_on: [parent.body.id] }),
        api(replicas[1]!).ack(job!.id, { lease_token: job!.lease_token }),
      ]);
      expect([child.status, ack.status]).toEqual([201, 200]);
      // Whichever came first: the child saw the parent completed, or the ack released it.
      expect(await stateOf(child.body.id)).toBe('ready');
    }
  });

  it('a parent nacked dead: cancel (the default) cancels the child and its own children; run runs it, recorded', async () => {
    const q = 'deps-dead';
    const enq = await api(app).enqueueBatch(q, [
      { payload: 'parent', max_attempts: 1 },
      { payload: 'cancelled', depends_on: [{ item: 0 }] },
      { payload: 'grandchild', depends_on: [{ item: 1 }] },
      { payload: 'runs', depends_on: [{ item: 0 }], on_parent_failure: 'run' },
    ]);
    const [parent, cancelled, grandchild, runs] = enq.body.jobs.map((j: { id: string }) => j.id);
    const [job] = await claimAll(q);
    expect(job!.id).toBe(parent);
    expect(
      (await api(app).nack(parent, { lease_token: job!.lease_token, error: { message: 'x' }, dead: true }))
        .status,
    ).toBe(200);

    await released();
    const child = (await api(app).get(cancelled)).body;
    expect(child.state).toBe('cancelled');
    expect(child.last_error.reason).toBe('parent_failed');
    expect(await stateOf(grandchild)).toBe('cancelled');
    const ran = (await api(app).get(runs)).body;
    expect(ran.state).toBe('ready');
    expect(ran.dependencies).toMatchObject({ parents: 1, parents_failed: 1, on_parent_failure: 'run' });

    // A new child of the dead parent meets its policy at once.
    const late = await api(app).enqueue(q, { payload: 'late', depends_on: [parent] });
    expect(late.body.state).toBe('cancelled');
    const lateRun = await api(app).enqueue(q, {
      payload: 'late',
      depends_on: [parent],
      on_parent_failure: 'run',
    });
    expect(lateRun.body.state).toBe('ready');

    // Redriving the dead parent brings the cancelled children (and grandchild) back to waiting.
    const redrive = await api(app).call('POST', `/v1/queues/${q}/redrive`, { ids: [parent] });
    expect(redrive.body.redriven).toBe(1);
    expect(await stateOf(cancelled)).toBe('waiting');
    expect(await stateOf(grandchild)).toBe('waiting');
    expect(await stateOf(late.body.id)).toBe('waiting');
    // The redriven parent now completes; its children, then the grandchild, follow.
    const round1 = await claimAll(q);
    expect(round1.map((j) => j.id)).toContain(parent);
    expect(round1.map((j) => j.id)).not.toContain(cancelled);
    for (const j of round1) await api(app).ack(j.id, { lease_token: j.lease_token });
    const round2 = await claimAll(q);
    expect(round2.map((j) => j.id).sort()).toEqual([cancelled, late.body.id].sort());
    for (const j of round2) await api(app).ack(j.id, { lease_token: j.lease_token });
    const round3 = await claimAll(q);
    expect(round3.map((j) => j.id)).toEqual([grandchild]);
  });

  it('a parent cancelled, a parent expired, a parent re-armed dead: each applies the policy', async () => {
    const q = 'deps-fail-paths';
    const enq = await api(app).enqueueBatch(q, [
      { payload: 'to-cancel', delay_ms: 60_000 },
      { payload: 'child-1', depends_on: [{ item: 0 }] },
      { payload: 'to-expire', run_at: new Date(Date.now() + 200).toISOString(), expires_in_ms: 400 },
      { payload: 'child-2', depends_on: [{ item: 2 }] },
    ]);
    const [toCancel, c1, toExpire, c2] = enq.body.jobs.map((j: { id: string }) => j.id);
    expect((await api(app).cancel(toCancel)).status).toBe(200);
    expect(await stateOf(c1)).toBe('cancelled');

    await sql`UPDATE baton.scheduled_jobs SET expires_at = now() - interval '1 ms' WHERE id = ${toExpire}::bigint`.execute(
      database.db,
    );
    await expireJobs(database.db, 100);
    expect(await stateOf(toExpire)).toBe('dead');
    expect(await stateOf(c2)).toBe('cancelled');

    const q2 = 'deps-rearm';
    const r = await api(app).enqueueBatch(q2, [
      { payload: 'p', max_attempts: 1 },
      { payload: 'c', depends_on: [{ item: 0 }], on_parent_failure: 'run' },
    ]);
    const [job] = await claimAll(q2);
    await sql`UPDATE baton.jobs SET lease_expires_at = now() - interval '1 ms' WHERE id = ${job!.id}::bigint`.execute(
      database.db,
    );
    await rearmExpiredLeases(database.db, 100);
    expect(await stateOf(job!.id)).toBe('dead');
    expect(await stateOf(r.body.jobs[1].id)).toBe('ready');
  });

  it('a waiting child cancelled: its parent completes later without harm; waiting counted in stats and lists', async () => {
    const q = 'deps-cancel-child';
    const enq = await api(app).enqueueBatch(q, [
      { payload: 'p' },
      { payload: 'c', depends_on: [{ item: 0 }] },
      { payload: 'w', depends_on: [{ item: 0 }] },
    ]);
    const [, child, other] = enq.body.jobs.map((j: { id: string }) => j.id);
    await refreshLiveStats(database.db);
    const queue = await api(app).call('GET', `/v1/queues/${q}`);
    expect(queue.body.stats.waiting).toBe(2);
    const list = await api(app).call('GET', `/v1/queues/${q}/jobs?state=waiting`);
    expect(list.body.jobs.map((j: { id: string }) => j.id)).toEqual([child, other]);

    const cancel = await api(app).cancel(child);
    expect(cancel.status).toBe(200);
    expect(cancel.body.state).toBe('cancelled');
    await runOne(q);
    expect(await stateOf(child)).toBe('cancelled');
    expect(await stateOf(other)).toBe('ready');
  });

  it('deadlines and expiry are kept by a waiting child; a deep chain runs in order', async () => {
    const q = 'deps-chain';
    const n = 50;
    const enq = await api(app).enqueueBatch(
      q,
      Array.from({ length: n }, (_, i) => ({
        payload: i,
        timeout_ms: 30_000,
        ...(i > 0 ? { depends_on: [{ item: i - 1 }] } : {}),
      })),
    );
    expect(enq.status).toBe(201);
    for (let i = 0; i < n; i++) {
      const claimed = await claimAll(q);
      expect(claimed.map((j) => j.payload)).toEqual([i]);
      expect(claimed[0]).toMatchObject({ deadline_at: expect.any(String) });
      await api(app).ack(claimed[0]!.id, { lease_token: claimed[0]!.lease_token });
    }
    expect(await claimAll(q)).toEqual([]);
  });

  it('a deep chain whose root dies is cancelled all the way down, a step per level', async () => {
    const q = 'deps-chain-dead';
    const n = 500;
    const enq = await api(app).enqueueBatch(
      q,
      Array.from({ length: n }, (_, i) => ({
        payload: i,
        max_attempts: 1,
        ...(i > 0 ? { depends_on: [{ item: i - 1 }] } : {}),
      })),
    );
    const [root] = await claimAll(q);
    await api(app).nack(root!.id, { lease_token: root!.lease_token, error: { message: 'no' }, dead: true });
    await released();
    const { rows } = await sql<{ n: number }>`
      SELECT count(*)::int AS n FROM baton.job_history WHERE queue = ${q} AND state = 'cancelled'`.execute(
      database.db,
    );
    expect(rows[0]!.n).toBe(n - 1);
    expect(await stateOf(enq.body.jobs[n - 1].id)).toBe('cancelled');
  });

  it('the leader forgets the edges of a child pruned past its retention, and only those', async () => {
    const q = 'deps-prune';
    const enq = await api(app).enqueueBatch(q, [
      { payload: 'p' },
      { payload: 'c', depends_on: [{ item: 0 }] },
    ]);
    const [parent, child] = enq.body.jobs.map((j: { id: string }) => j.id);
    await runOne(q);
    await runOne(q);
    const edges = async () =>
      (
        await sql<{
          n: number;
        }>`SELECT count(*)::int AS n FROM baton.job_edges WHERE child = ${child}::bigint`.execute(database.db)
      ).rows[0]!.n;
    expect((await forgetEdgesOfGoneJobs(database.db, '0', 1000)).deleted).toBe(0);
    expect(await edges()).toBe(1);
    await sql`DELETE FROM baton.job_history WHERE id = ${child}::bigint`.execute(database.db);
    await forgetEdgesOfGoneJobs(database.db, '0', 100_000);
    expect(await edges()).toBe(0);
    expect(await stateOf(parent)).toBe('completed');
  });

  it('a queue-limited key may only name parents in queues it may use', async () => {
    const other = await api(app).enqueue('deps-secret', { payload: 1 });
    const limited = await createTestApp(database, {
      BATON_API_KEYS: JSON.stringify([apiKeyEntry('limited', ['producer', 'consumer'], ['deps-mine*'])]),
    });
    try {
      const res = await limited.inject({
        method: 'POST',
        url: '/v1/queues/deps-mine/jobs',
        headers: bearer('limited'),
        payload: { payload: 1, depends_on: [other.body.id] },
      });
      expect(res.statusCode).toBe(400);
      expect(res.body).toContain('depends_on[0]');
    } finally {
      await limited.close();
    }
  });
});

describe('a workflow awaited and reporting progress', () => {
  it("a producer awaits the graph's last job: the wait ends with its result once its parents and it have run", async () => {
    const q = 'deps-await';
    const enq = await api(app).enqueueBatch(q, [
      { payload: 'fetch' },
      { payload: 'sum', depends_on: [{ item: 0 }] },
    ]);
    const [fetch, sum] = enq.body.jobs.map((j: { id: string }) => j.id);
    // Awaited while it is still waiting for its parent, on another replica than the one that acks.
    const awaited = replicas[1]!.inject({ method: 'GET', url: `/v1/jobs/${sum}?wait_ms=10000` });
    await new Promise((r) => setTimeout(r, 100));
    expect(await stateOf(sum)).toBe('waiting');

    const parent = (await claimAll(q))[0]!;
    expect(parent.id).toBe(fetch);
    const renewed = await api(app).renew(fetch, {
      lease_token: parent.lease_token,
      progress: { done: 1, of: 2 },
    });
    expect(renewed.status).toBe(200);
    expect((await api(app).get(fetch)).body.progress).toEqual({ done: 1, of: 2 });
    await api(app).ack(fetch, { lease_token: parent.lease_token, result: { rows: 2 } });

    const child = (await claimAll(q))[0]!;
    expect(child.id).toBe(sum);
    const parents = await app.inject({ method: 'GET', url: `/v1/jobs/${sum}/parents` });
    expect(parents.json().jobs.map((p: { result: unknown }) => p.result)).toEqual([{ rows: 2 }]);
    await api(app).ack(sum, { lease_token: child.lease_token, result: { total: 3 } });

    const answer = await awaited;
    expect(answer.statusCode).toBe(200);
    expect(answer.json()).toMatchObject({ id: sum, state: 'completed', result: { total: 3 } });
    // The parent keeps its last progress report once finished.
    expect((await api(app).get(fetch)).body).toMatchObject({
      state: 'completed',
      progress: { done: 1, of: 2 },
    });
  });
});
