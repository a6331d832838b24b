import { describe, expect, it } from 'vitest';
import { useTestApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { api } from '../support/http.js';

const database = useTestDatabase();
const app = useTestApp(database);

describe('job groups', () => {
  it('keeps a job’s group from enqueue through claim, read and list, and filters lists by it', async () => {
    const client = api(app);
    const one = await client.enqueue('g-basic', { payload: 1, group: 'customer:42' });
    expect(one.status).toBe(201);
    expect(one.body.group).toBe('customer:42');
    const batch = await client.enqueueBatch('g-basic', [
      { payload: 2, group: 'ops@example.com' },
      { payload: 3 },
      { payload: 4, group: 'customer:42' },
    ]);
    expect(batch.body.jobs.map((j: { group: string | null }) => j.group)).toEqual([
      'ops@example.com',
      null,
      'customer:42',
    ]);
    const listed = await client.call('GET', '/v1/queues/g-basic/jobs?state=ready&group=customer:42');
    expect(listed.body.jobs.map((j: { payload: null; id: string }) => j.id)).toEqual([
      one.body.id,
      batch.body.jobs[2].id,
    ]);
    const claimed = await client.claim('g-basic', { max_jobs: 4 });
    expect(claimed.body.jobs).toHaveLength(4);
    expect(new Set(claimed.body.jobs.map((j: { group: string | null }) => j.group))).toEqual(
      new Set(['customer:42', 'ops@example.com', null]),
    );
    expect((await client.get(one.body.id)).body.group).toBe('customer:42');
    const claimedList = await client.call(
      'GET',
      '/v1/queues/g-basic/jobs?state=claimed&group=ops@example.com',
    );
    expect(claimedList.body.jobs).toHaveLength(1);
  });

  it('refuses a bad group with a 400 naming the field', async () => {
    const client = api(app);
    for (const group of ['', 'a b', 'x'.repeat(129), 'tab\t', 'é']) {
      const res = await client.enqueue('g-bad', { payload: 1, group });
      expect(res.status, group).toBe(400);
      expect(res.body.errors[0].field).toBe('group');
    }
    const batch = await client.enqueueBatch('g-bad', [{ payload: 1 }, { payload: 2, group: 'no space' }]);
    expect(batch.status).toBe(400);
    expect(batch.body.errors[0].field).toBe('jobs[1].group');
    const list = await client.call('GET', '/v1/queues/g-bad/jobs?state=ready&group=a%20b');
    expect(list.status).toBe(400);
    expect(list.body.errors[0].field).toBe('group');
  });
});
