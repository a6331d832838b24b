import { describe, expect, it } from 'vitest';
import { useTestApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { apiKeyEntry, bearer } from '../support/keys.js';

/**
 * A job's `dependencies` counts are read like every other read of a queue-limited key: only parents
 * in queues the key may see count. An edge across tenants can only be made by a key that sees both
 * (an admin); the tenant on either side then learns nothing of the other's job through it.
 */
const database = useTestDatabase();
const app = useTestApp(database, {
  BATON_API_KEYS: JSON.stringify([
    apiKeyEntry('root', ['admin']),
    apiKeyEntry('tenant-a', ['consumer', 'producer'], ['a.*']),
    apiKeyEntry('tenant-b', ['consumer', 'producer'], ['b.*']),
  ]),
  BATON_OPEN_ENDPOINTS: 'none',
});

const call = async (who: string, method: 'GET' | 'POST', url: string, payload?: object) => {
  const res = await app.inject({ method, url, headers: bearer(who), ...(payload ? { payload } : {}) });
  return { status: res.statusCode, body: res.json() };
};
const enqueue = async (who: string, queue: string, body: object) => {
  const res = await call(who, 'POST', `/v1/queues/${queue}/jobs`, body);
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body.id as string;
};

describe("a job's dependencies, read by a queue-limited key", () => {
  it('count only the parents of queues the key may see; the admin sees them all', async () => {
    const parentA = await enqueue('tenant-a', 'a.jobs', { payload: 'a' });
    const parentB = await enqueue('tenant-b', 'b.jobs', { payload: 'b', delay_ms: 60_000 });
    // Only a key that sees both queues can make these edges.
    const childOfBoth = await enqueue('root', 'a.jobs', { payload: 'c', depends_on: [parentA, parentB] });
    const childOfB = await enqueue('root', 'a.jobs', { payload: 'd', depends_on: [parentB] });
    const refused = await call('tenant-a', 'POST', '/v1/queues/a.jobs/jobs', {
      payload: 1,
      depends_on: [parentB],
    });
    expect(refused.status).toBe(400);

    const asAdmin = await call('root', 'GET', `/v1/jobs/${childOfBoth}`);
    expect(asAdmin.body.dependencies).toMatchObject({ parents: 2, parents_pending: 2 });

    const asA = await call('tenant-a', 'GET', `/v1/jobs/${childOfBoth}`);
    expect(asA.status).toBe(200);
    expect(asA.body).toMatchObject({ state: 'waiting', dependencies: { parents: 1, parents_pending: 1 } });
    const listed = await call('tenant-a', 'GET', `/v1/jobs/${childOfBoth}/parents`);
    expect(listed.body.jobs.map((j: { id: string }) => j.id)).toEqual([parentA]);

    // A job whose every parent is another tenant's shows no dependencies to its own tenant.
    const onlyB = await call('tenant-a', 'GET', `/v1/jobs/${childOfB}`);
    expect(onlyB.status).toBe(200);
    expect(onlyB.body).not.toHaveProperty('dependencies');
    expect((await call('root', 'GET', `/v1/jobs/${childOfB}`)).body.dependencies).toMatchObject({
      parents: 1,
    });

    // And B cannot read A's child at all.
    expect((await call('tenant-b', 'GET', `/v1/jobs/${childOfBoth}`)).status).toBe(404);
  });
});
