import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { createTestApp, useTestApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { api } from '../support/http.js';
import { apiKeyEntry, bearer } from '../support/keys.js';

const database = useTestDatabase();
const app = useTestApp(database);

interface Graph {
  jobs: { id: string; queue: string; state: string | null }[];
  edges: { parent: string; child: string }[];
  truncated: boolean;
}

const graphOf = async (id: string) => {
  const res = await app.inject({ method: 'GET', url: `/v1/jobs/${id}/graph` });
  expect(res.statusCode).toBe(200);
  return res.json() as Graph;
};

const sortedEdges = (edges: Graph['edges']) => edges.map((e) => `${e.parent}>${e.child}`).sort();

describe("a job's workflow graph", () => {
  it('reaches every job linked either way, from any of them, with each state and the edges among them', async () => {
    const q = 'graph-diamond';
    // A → B, A → C, B → D, C → D, and E → D: from B the walk goes up to A, down to D, and up again to E.
    const enq = await api(app).enqueueBatch(q, [
      { payload: 'A' },
      { payload: 'B', depends_on: [{ item: 0 }] },
      { payload: 'C', depends_on: [{ item: 0 }] },
      { payload: 'E' },
      { payload: 'D', depends_on: [{ item: 1 }, { item: 2 }, { item: 3 }] },
    ]);
    expect(enq.status).toBe(201);
    const [a, b, c, e, d] = enq.body.jobs.map((j: { id: string }) => j.id);
    const expected = [`${a}>${b}`, `${a}>${c}`, `${b}>${d}`, `${c}>${d}`, `${e}>${d}`].sort();

    for (const from of [a, b, d, e]) {
      const graph = await graphOf(from);
      expect(graph.jobs[0]!.id).toBe(from);
      expect(graph.jobs.map((j) => j.id).sort()).toEqual([a, b, c, d, e].sort());
      expect(sortedEdges(graph.edges)).toEqual(expected);
      expect(graph.truncated).toBe(false);
    }

    // States are read where each job is now: A run and acked, D pruned from history.
    const claimed = await api(app).claim(q, { max_jobs: 10 });
    const first = claimed.body.jobs.find((j: { id: string }) => j.id === a);
    await api(app).ack(a, { lease_token: first.lease_token, result: 1 });
    await sql`DELETE FROM baton.waiting_jobs WHERE id = ${d}::bigint`.execute(database.db);
    const states = Object.fromEntries((await graphOf(c)).jobs.map((j) => [j.id, j.state]));
    expect(states[a]).toBe('completed');
    expect(states[e]).toBe('claimed');
    expect(states[d]).toBeNull();
  });

  it('a job without dependencies is a graph of one', async () => {
    const one = await api(app).enqueue('graph-alone', { payload: 1 });
    expect(await graphOf(one.body.id)).toEqual({
      jobs: [{ id: one.body.id, queue: 'graph-alone', state: 'ready' }],
      edges: [],
      truncated: false,
    });
  });

  it('a fan-out of 3,000 children: the 100 nearest jobs, truncated, edges only among them', async () => {
    const q = 'graph-fan';
    const root = await api(app).enqueue(q, { payload: 'root' });
    for (let i = 0; i < 3; i++) {
      const batch = await api(app).enqueueBatch(
        q,
        Array.from({ length: 1000 }, (_, k) => ({ payload: k, depends_on: [root.body.id] })),
      );
      expect(batch.status).toBe(201);
    }
    const child = (
      await app.inject({ method: 'GET', url: `/v1/jobs/${root.body.id}/children?limit=1` })
    ).json().jobs[0].id as string;
    for (const from of [root.body.id, child]) {
      const graph = await graphOf(from);
      expect(graph.truncated).toBe(true);
      expect(graph.jobs).toHaveLength(100);
      expect(graph.jobs[0]!.id).toBe(from);
      // The root is one step from anywhere in a fan-out, so it is always among the nearest.
      expect(graph.jobs.map((j) => j.id)).toContain(root.body.id);
      const ids = new Set(graph.jobs.map((j) => j.id));
      expect(graph.edges).toHaveLength(99);
      for (const edge of graph.edges) {
        expect(edge.parent).toBe(root.body.id);
        expect(ids.has(edge.child)).toBe(true);
      }
    }
  });

  it("a queue-limited key's graph goes only through its own queues; another tenant's job is not found", async () => {
    // An admin may link jobs across tenants; the tenant must learn nothing of the other side.
    const secret = await api(app).enqueue('graph-secret', { payload: 's' });
    const mine = await api(app).enqueue('graph-mine', { payload: 'm', depends_on: [secret.body.id] });
    const below = await api(app).enqueue('graph-mine', { payload: 'b', depends_on: [mine.body.id] });
    const beyond = await api(app).enqueue('graph-secret', { payload: 'x', depends_on: [below.body.id] });
    const limited = await createTestApp(database, {
      BATON_API_KEYS: JSON.stringify([apiKeyEntry('limited', ['producer', 'consumer'], ['graph-mine'])]),
    });
    try {
      const read = (id: string) =>
        limited.inject({ method: 'GET', url: `/v1/jobs/${id}/graph`, headers: bearer('limited') });
      const graph = (await read(mine.body.id)).json() as Graph;
      expect(graph.jobs.map((j) => j.id).sort()).toEqual([mine.body.id, below.body.id].sort());
      expect(graph.edges).toEqual([{ parent: mine.body.id, child: below.body.id }]);
      expect(graph.truncated).toBe(false);
      const hidden = await read(secret.body.id);
      expect(hidden.statusCode).toBe(404);
      expect(hidden.body).not.toContain('graph-secret');
      // The admin sees all four.
      expect((await graphOf(below.body.id)).jobs).toHaveLength(4);
      expect((await graphOf(beyond.body.id)).jobs.map((j) => j.queue).sort()).toEqual([
        'graph-mine',
        'graph-mine',
        'graph-secret',
        'graph-secret',
      ]);
    } finally {
      await limited.close();
    }
  });

  it('an unknown job is 404', async () => {
    const res = await app.inject({ method: 'GET', url: '/v1/jobs/987654321/graph' });
    expect(res.statusCode).toBe(404);
    expect(res.headers['content-type']).toContain('application/problem+json');
  });
});
