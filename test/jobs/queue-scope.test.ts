import { describe, expect, it } from 'vitest';
import { cancelJob } from '../../src/jobs/cancel.js';
import { nackJob } from '../../src/jobs/nack.js';
import { getJob } from '../../src/jobs/read.js';
import { renewLeases } from '../../src/jobs/renew.js';
import { AckAndClaimGroups, AckGroups } from '../../src/jobs/statement-groups.js';
import { useTestApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { enqueueAndClaim } from '../support/http.js';

/**
 * The tenant boundary is in the statements, not only in the check before them: given the queue a
 * caller may act on (a queue-limited key's, an SQS request's QueueUrl), every statement that names a
 * job by id and lease token matches it only in that queue. With the right id and token, a caller
 * scoped to another queue finds nothing, changes nothing, and learns nothing (not_found, as for a job
 * that never existed); scoped to the job's own queue, everything works as before.
 */
const database = useTestDatabase();
const app = useTestApp(database);

describe('statements scoped to a queue', () => {
  it('renew, ack, batch ack, nack, ack-and-claim, cancel and read find nothing outside the given queue', async () => {
    const job = await enqueueAndClaim(app, 'scope-a');
    const lease = { id: job.id, leaseToken: job.lease_token, queue: 'scope-b' };
    const acks = new AckGroups(app.db);

    expect(await renewLeases(app.db, [{ ...lease, leaseMs: 60_000 }])).toEqual([{ outcome: 'not_found' }]);
    expect(await acks.ack(lease)).toEqual({ outcome: 'not_found' });
    expect(await acks.ackBatch([lease])).toEqual([{ outcome: 'not_found' }]);
    expect(await nackJob(app.db, { ...lease, dead: true }, app.config)).toEqual({ outcome: 'not_found' });
    const both = await new AckAndClaimGroups(app.db, app.config.defaultLeaseMs).ackAndClaim({
      ...lease,
      next: { maxJobs: 1 },
    });
    expect(both.job).toBeUndefined();
    await expect(cancelJob(app.db, job.id, 'scope-b')).rejects.toMatchObject({ code: 'not_found' });
    expect(await getJob(app.db, job.id, 'scope-b')).toBeUndefined();

    // Untouched: still claimed under its token, its lease as the claim set it.
    const before = await getJob(app.db, job.id);
    expect(before).toMatchObject({ state: 'claimed', queue: 'scope-a', attempts: 1 });
    expect(before!.lease_expires_at!.toISOString()).toBe(new Date(job.lease_expires_at).toISOString());

    // In its own queue the same writes go through, and a repeated ack is recognised only there.
    const own = { ...lease, queue: 'scope-a' };
    expect((await renewLeases(app.db, [own]))[0]!.outcome).toBe('done');
    expect((await acks.ack(own)).outcome).toBe('done');
    expect((await acks.ack(own)).outcome).toBe('done');
    expect(await acks.ack(lease)).toEqual({ outcome: 'not_found' });
    expect(await getJob(app.db, job.id, 'scope-a')).toMatchObject({ state: 'completed' });
  });

  it('a batch mixing scopes acks only the items whose job is in their queue', async () => {
    const a = await enqueueAndClaim(app, 'scope-mix-a');
    const b = await enqueueAndClaim(app, 'scope-mix-b');
    const outcomes = await new AckGroups(app.db).ackBatch([
      { id: a.id, leaseToken: a.lease_token, queue: 'scope-mix-b' },
      { id: b.id, leaseToken: b.lease_token, queue: 'scope-mix-b' },
    ]);
    expect(outcomes.map((o) => o.outcome)).toEqual(['not_found', 'done']);
    expect((await getJob(app.db, a.id))?.state).toBe('claimed');
    expect((await getJob(app.db, b.id))?.state).toBe('completed');
  });

  it('without a queue (a key that may use every queue) nothing changes', async () => {
    const job = await enqueueAndClaim(app, 'scope-any');
    const out = await new AckGroups(app.db).ack({ id: job.id, leaseToken: job.lease_token });
    expect(out.outcome).toBe('done');
  });
});
