import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { QueueStatsDuty } from '../../src/maintenance/queue-stats.js';
import { useTestApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { api } from '../support/http.js';

/** One client must not be able to create queues without end, nor make the leader's ticks grow with them. */
const database = useTestDatabase();
const app = useTestApp(database, { BATON_MAX_AUTO_QUEUES: '5' });

describe('the cap on auto-created queues', () => {
  it('refuses the enqueue that would create one more, with 409 queue_limit_reached; nothing is stored', async () => {
    const answers = await Promise.all(
      Array.from({ length: 12 }, (_, i) => api(app).enqueue(`cap-${i}`, { payload: i })),
    );
    const created = answers.filter((a) => a.status === 201);
    const refused = answers.filter((a) => a.status === 409);
    expect(created).toHaveLength(5);
    expect(refused).toHaveLength(7);
    for (const r of refused) {
      expect(r.body.code).toBe('queue_limit_reached');
      expect(r.body.detail).toContain('BATON_MAX_AUTO_QUEUES');
    }
    const counts = await sql<{ queues: number; jobs: number }>`
      SELECT (SELECT count(*)::int FROM baton.queues) AS queues,
             (SELECT count(*)::int FROM baton.jobs) AS jobs`.execute(database.db);
    expect(counts.rows[0]).toEqual({ queues: 5, jobs: 5 });
  });

  it('existing queues keep taking jobs, and queues created with PUT are not capped', async () => {
    const full = (await api(app).call('GET', '/v1/queues')).body.queues[0].name;
    expect((await api(app).enqueue(full, { payload: 'more' })).status).toBe(201);
    expect((await api(app).call('PUT', '/v1/queues/cap-explicit', {})).status).toBe(201);
    expect((await api(app).enqueue('cap-explicit', { payload: 1 })).status).toBe(201);
  });
});

describe('queue statistics with many queues', () => {
  it('count a bounded batch of queues per tick, in turn, until every queue is counted', async () => {
    await sql`DELETE FROM baton.queue_stats`.execute(database.db);
    const names = (
      await sql<{ name: string }>`SELECT name FROM baton.queues ORDER BY name`.execute(database.db)
    ).rows.map((r) => r.name);
    expect(names.length).toBe(6);
    const duty = new QueueStatsDuty(database.db, 5000, 60_000, 4);
    expect(await duty.runOnce()).toMatchObject({ queues: 4 });
    expect(await duty.runOnce()).toMatchObject({ queues: 2 });
    const counted = await sql<{ queue: string }>`SELECT queue FROM baton.queue_stats ORDER BY queue`.execute(
      database.db,
    );
    expect(counted.rows.map((r) => r.queue)).toEqual(names);
    // After the end of the list, the next tick starts again from the first queue.
    expect(await duty.runOnce()).toMatchObject({ queues: 4 });
  });
});
