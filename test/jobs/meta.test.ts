import { describe, expect, it } from 'vitest';
import { enqueueJobs } from '../../src/jobs/enqueue/enqueue.js';
import { redriveDeadJobs } from '../../src/jobs/redrive.js';
import { upsertQueue } from '../../src/queues/queue-store.js';
import { useTestApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { api } from '../support/http.js';

/**
 * A job's metadata (baton.jobs.meta, migrations/0008_job_meta.ts) is written at enqueue and stays
 * with the job through claim, every way of finishing, GET and a redrive. Only layers that set it
 * (the SQS endpoint) write it; the native API shows it and never loses it.
 */
const database = useTestDatabase();
const app = useTestApp(database);

const options = {
  autoCreate: { enabled: true, maxQueues: 100 },
  defaultMaxAttempts: 5,
  idempotencyRetentionMs: 60_000,
};
const META = { sqs: { attributes: { colour: { DataType: 'String', StringValue: 'blue' } } } };

async function enqueueWithMeta(queue: string, meta: unknown = META): Promise<string> {
  const [result] = await enqueueJobs(app.db, queue, [{ payloadJson: '"body"', priority: 0, meta }], options);
  return result!.job.id;
}

describe('job metadata', () => {
  it('is kept from enqueue through claim and ack, and shown by GET', async () => {
    const id = await enqueueWithMeta('m-ack');
    const [claimed] = (await api(app).claim('m-ack')).body.jobs;
    expect(claimed.id).toBe(id);
    expect((await api(app).get(id)).body.meta).toEqual(META);
    await api(app).ack(id, { lease_token: claimed.lease_token });
    const done = (await api(app).get(id)).body;
    expect(done).toMatchObject({ state: 'completed', meta: META });
  });

  it('is null for a job enqueued without any, and a list shows it only with include_payload', async () => {
    const plain = await api(app).enqueue('m-list', { payload: 1 });
    expect((await api(app).get(plain.body.id)).body.meta).toBeNull();
    await enqueueWithMeta('m-list');
    const brief = await api(app).call('GET', '/v1/queues/m-list/jobs?state=ready');
    expect(brief.body.jobs.map((j: { meta: unknown }) => j.meta)).toEqual([null, null]);
    const full = await api(app).call('GET', '/v1/queues/m-list/jobs?state=ready&include_payload=true');
    expect(full.body.jobs.map((j: { meta: unknown }) => j.meta)).toEqual([null, META]);
  });

  it('survives nack to dead, cancel, and a redrive into another queue (same id, that queue’s attempts)', async () => {
    const dead = await enqueueWithMeta('m-dead');
    const [claimed] = (await api(app).claim('m-dead')).body.jobs;
    await api(app).nack(dead, { lease_token: claimed.lease_token, dead: true });
    expect((await api(app).get(dead)).body).toMatchObject({ state: 'dead', meta: META });

    const cancelled = await enqueueWithMeta('m-dead', { other: true });
    await api(app).cancel(cancelled);
    expect((await api(app).get(cancelled)).body).toMatchObject({ state: 'cancelled', meta: { other: true } });

    await upsertQueue(app.db, 'm-dlq', { max_attempts: 7 });
    const moved = await redriveDeadJobs(
      app.db,
      'm-dead',
      { all: true },
      { autoCreate: options.autoCreate, toQueue: 'm-dlq' },
    );
    expect(moved).toBe(1);
    const job = (await api(app).get(dead)).body;
    expect(job).toMatchObject({ queue: 'm-dlq', state: 'ready', attempts: 0, max_attempts: 7, meta: META });
  });
});
