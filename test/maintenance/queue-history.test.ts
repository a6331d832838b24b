import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { pruneQueueHistory, recordQueueHistory } from '../../src/maintenance/queue-history.js';
import { refreshLiveStats } from '../../src/maintenance/queue-stats.js';
import { useTestApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { api, enqueueAndClaim } from '../support/http.js';

const database = useTestDatabase();
const app = useTestApp(database);

/** Count the queues, then take a history sample: what the leader does each minute. */
async function sample(): Promise<number> {
  await refreshLiveStats(database.db);
  return recordQueueHistory(database.db);
}

async function rows(queue: string) {
  const { rows } = await sql<Record<string, string | null>>`
    SELECT scheduled, ready, claimed, enqueued, completed, dead, cancelled, oldest_ready_age_ms,
           (since < at) AS window_ok
    FROM baton.queue_history WHERE queue = ${queue} ORDER BY minute`.execute(database.db);
  return rows;
}

/** Move a queue's samples a minute back, as if they had been taken in the previous minute. */
const aMinuteLater = (queue: string) =>
  sql`UPDATE baton.queue_history SET minute = minute - interval '1 minute' WHERE queue = ${queue}`.execute(
    database.db,
  );

async function enqueue(queue: string, n: number) {
  for (let i = 0; i < n; i++) expect((await api(app).enqueue(queue, { payload: i })).status).toBe(201);
}

/** Claims go by priority: these jobs jump the queue, so the claim gets the job just enqueued. */
const first = { payload: 'first', priority: 1000 };

async function ackOne(queue: string) {
  const job = await enqueueAndClaim(app, queue, first);
  expect((await api(app).ack(job.id, { lease_token: job.lease_token })).status).toBe(200);
}

async function killOne(queue: string) {
  const job = await enqueueAndClaim(app, queue, first);
  const nack = await api(app).nack(job.id, { lease_token: job.lease_token, dead: true });
  expect(nack.body.state).toBe('dead');
}

describe('queue history', () => {
  it('a sample holds the live counts and what arrived and finished since the previous sample', async () => {
    await enqueue('h-flow', 2);
    await ackOne('h-flow');
    await sample();
    // A new queue had nothing before it was created: all three jobs arrived in this window.
    expect(await rows('h-flow')).toEqual([
      expect.objectContaining({ ready: '2', claimed: '0', enqueued: '3', completed: '1', dead: '0' }),
    ]);

    await aMinuteLater('h-flow');
    await enqueue('h-flow', 2); // live 4
    await ackOne('h-flow'); // arrives and completes: live 4
    await killOne('h-flow'); // arrives and dies: live 4
    await enqueueAndClaim(app, 'h-flow', first); // live 5, one claimed
    await sample();
    const [, second] = await rows('h-flow');
    // Arrivals = live now (5) − live then (2) + finished in between (2).
    expect(second).toEqual(
      expect.objectContaining({ ready: '4', claimed: '1', enqueued: '5', completed: '1', dead: '1' }),
    );
    expect(second!.window_ok).toBe(true);
    expect(Number(second!.oldest_ready_age_ms)).toBeGreaterThanOrEqual(0);
  });

  it('counts cancelled jobs, and redriven ones as arrivals', async () => {
    await killOne('h-redrive');
    await sample();
    await aMinuteLater('h-redrive');
    const redrive = await api(app).call('POST', '/v1/queues/h-redrive/redrive', { all: true });
    expect(redrive.body.redriven).toBe(1);
    await enqueue('h-redrive', 1);
    expect((await api(app).call('POST', '/v1/queues/h-redrive/purge')).body.cancelled).toBe(2);
    await sample();
    const [, second] = await rows('h-redrive');
    expect(second).toEqual(expect.objectContaining({ ready: '0', enqueued: '2', cancelled: '2', dead: '0' }));
  });

  it('one sample per queue and minute, even from two leaders at once', async () => {
    await enqueue('h-once', 1);
    await refreshLiveStats(database.db);
    const [a, b] = await Promise.all([recordQueueHistory(database.db), recordQueueHistory(database.db)]);
    expect(a + b).toBeGreaterThan(0);
    expect(await rows('h-once')).toHaveLength(1);
    // Later in the same minute: still one.
    await sample();
    expect(await rows('h-once')).toHaveLength(1);
  });

  it('writes nothing for a queue idle since an idle sample', async () => {
    await api(app).call('PUT', '/v1/queues/h-idle', {});
    await sample();
    expect(await rows('h-idle')).toEqual([expect.objectContaining({ ready: '0', enqueued: '0' })]);
    await aMinuteLater('h-idle');
    await sample();
    expect(await rows('h-idle')).toHaveLength(1);
    await aMinuteLater('h-idle');
    await ackOne('h-idle');
    await sample();
    expect(await rows('h-idle')).toEqual([
      expect.objectContaining({ completed: '0' }),
      expect.objectContaining({ ready: '0', enqueued: '1', completed: '1' }),
    ]);
    // The step back to idle is recorded once.
    await aMinuteLater('h-idle');
    await sample();
    await aMinuteLater('h-idle');
    await sample();
    expect(await rows('h-idle')).toHaveLength(3);
  });

  it('does not guess arrivals for an older queue sampled for the first time', async () => {
    await enqueue('h-old', 2);
    await sql`UPDATE baton.queues SET created_at = now() - interval '1 hour' WHERE name = 'h-old'`.execute(
      database.db,
    );
    await sample();
    expect(await rows('h-old')).toEqual([expect.objectContaining({ ready: '2', enqueued: null })]);
  });

  it('prunes rows past retention but keeps each queue’s latest, and drops a removed queue’s', async () => {
    await enqueue('h-prune', 1);
    await sample();
    await aMinuteLater('h-prune');
    await enqueue('h-prune', 1);
    await sample();
    await enqueue('h-gone', 1);
    await sample();
    await sql`UPDATE baton.queue_history SET minute = minute - interval '2 days'
              WHERE queue IN ('h-prune', 'h-gone')`.execute(database.db);
    await api(app).call('DELETE', '/v1/queues/h-gone?force=true');
    expect(await pruneQueueHistory(database.db)).toBeGreaterThanOrEqual(2);
    expect(await rows('h-prune')).toEqual([expect.objectContaining({ ready: '2' })]);
    expect(await rows('h-gone')).toEqual([]);
  });
});
