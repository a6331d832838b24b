import { describe, expect, it } from 'vitest';
import { useTestApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { api } from '../support/http.js';

/**
 * An enqueue answered by an existing job (its idempotency key, or a unique key a waiting job holds)
 * creates nothing and changes no edge of that job, so the request's depends_on is not applied. The
 * answer says so (`depends_on_applied: false`), for a single enqueue, each batch item and the minimal
 * batch answer, so a caller never believes in a dependency that does not exist.
 */
const database = useTestDatabase();
const app = useTestApp(database);

const idsOf = (body: { jobs: { id: string }[] }) => body.jobs.map((j) => j.id);
const parentsOf = async (id: string) => idsOf((await api(app).call('GET', `/v1/jobs/${id}/parents`)).body);

describe('depends_on of an item answered by an existing job', () => {
  it('an idempotency key: the first enqueue applies depends_on, a later one says it did not', async () => {
    const q = 'da-idem';
    const [p1, p2] = idsOf((await api(app).enqueueBatch(q, [{ payload: 1 }, { payload: 2 }])).body);
    const first = await api(app).enqueue(q, { payload: 'c', idempotency_key: 'c', depends_on: [p1] });
    expect(first.status).toBe(201);
    expect(first.body).toMatchObject({ state: 'waiting', depends_on_applied: true });

    // A retry of the same request: the original job, whose parents are the ones it was sent with.
    const retry = await api(app).enqueue(q, { payload: 'c', idempotency_key: 'c', depends_on: [p1] });
    expect(retry.status).toBe(200);
    expect(retry.body).toMatchObject({ id: first.body.id, depends_on_applied: false });

    // Other parents under the same key: not added, and the answer says so.
    const other = await api(app).enqueue(q, { payload: 'c', idempotency_key: 'c', depends_on: [p2] });
    expect(other.status).toBe(200);
    expect(other.body).toMatchObject({ id: first.body.id, depends_on_applied: false });
    expect(await parentsOf(first.body.id)).toEqual([p1]);
    expect((await api(app).get(first.body.id)).body.dependencies).toMatchObject({ parents: 1 });
  });

  it('a unique key held by a waiting job, with keep or replace: not applied, and said', async () => {
    const q = 'da-unique';
    const parent = (await api(app).enqueue(q, { payload: 'p' })).body.id;
    const holder = await api(app).enqueue(q, { payload: 1, unique_key: 'report', delay_ms: 60_000 });
    expect(holder.status).toBe(201);
    expect(holder.body).not.toHaveProperty('depends_on_applied');
    for (const on_conflict of ['keep', 'replace'] as const) {
      const res = await api(app).enqueue(q, {
        payload: 2,
        unique_key: 'report',
        on_conflict,
        depends_on: [parent],
      });
      expect(res.status, on_conflict).toBe(200);
      // (replace gives the job this item's run_at, now: it turns ready, and still has no parent.)
      expect(res.body, on_conflict).toMatchObject({
        id: holder.body.id,
        state: on_conflict === 'keep' ? 'scheduled' : 'ready',
        depends_on_applied: false,
      });
    }
    expect(await parentsOf(holder.body.id)).toEqual([]);
  });

  it('a batch says it per item, in the full and the minimal answer', async () => {
    const q = 'da-batch';
    const parent = (await api(app).enqueue(q, { payload: 'p' })).body.id;
    const items = [
      { payload: 'a', idempotency_key: 'a', depends_on: [parent] },
      { payload: 'b' },
      // The same key again in one request: the first item's job answers it, with the first's parents.
      { payload: 'a2', idempotency_key: 'a', depends_on: [{ item: 1 }] },
    ];
    const first = await api(app).enqueueBatch(q, items);
    expect(first.status).toBe(201);
    const answers = first.body.jobs.map((j: Record<string, unknown>) => [j.created, j.depends_on_applied]);
    expect(answers).toEqual([
      [true, true],
      [true, undefined],
      [false, false],
    ]);
    expect(first.body.jobs[1]).not.toHaveProperty('depends_on_applied');

    const minimal = await app.inject({
      method: 'POST',
      url: `/v1/queues/${q}/jobs/batch`,
      headers: { prefer: 'return=minimal' },
      payload: { jobs: items },
    });
    expect(minimal.statusCode).toBe(201);
    const a = first.body.jobs[0].id;
    expect(minimal.json().jobs).toEqual([
      { id: a, created: false, depends_on_applied: false },
      { id: expect.any(String), created: true },
      { id: a, created: false, depends_on_applied: false },
    ]);
    expect(await parentsOf(a)).toEqual([parent]);
  });
});
