import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { collectIdleQueues } from '../../src/maintenance/queue-gc.js';
import { useTestApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { api, enqueueAndClaim } from '../support/http.js';

const database = useTestDatabase();
const app = useTestApp(database);
const IDLE = 3600_000;

const backdate = (names: string[]) =>
  sql`UPDATE baton.queues SET updated_at = now() - interval '2 hours', created_at = now() - interval '2 hours'
      WHERE name = ANY(${names}::text[])`.execute(database.db);

async function queueExists(name: string) {
  return (
    (await database.db.selectFrom('baton.queues').select('name').where('name', '=', name).execute())
      .length === 1
  );
}

describe('queue GC', () => {
  it('removes an idle auto-created queue with no live jobs', async () => {
    const job = await enqueueAndClaim(app, 'gc-idle');
    await api(app).ack(job.id, { lease_token: job.lease_token });
    await sql`UPDATE baton.job_history SET finished_at = now() - interval '2 hours' WHERE queue = 'gc-idle'`.execute(
      database.db,
    );
    await backdate(['gc-idle']);
    const result = await collectIdleQueues(database.db, IDLE, 100);
    expect(result.removed).toContain('gc-idle');
    expect(await queueExists('gc-idle')).toBe(false);
    // Its finished job is still readable.
    expect((await api(app).get(job.id)).body.state).toBe('completed');
  });

  it('keeps explicit, paused, recently used and non-empty queues', async () => {
    await database.db
      .insertInto('baton.queues')
      .values({ name: 'gc-explicit', auto_created: false })
      .execute();
    await database.db
      .insertInto('baton.queues')
      .values({ name: 'gc-paused', auto_created: true, paused: true })
      .execute();
    await api(app).enqueue('gc-live', { payload: 1, delay_ms: 60_000 });
    await enqueueAndClaim(app, 'gc-claimed');
    const recent = await enqueueAndClaim(app, 'gc-recent');
    await api(app).ack(recent.id, { lease_token: recent.lease_token });
    await database.db.insertInto('baton.queues').values({ name: 'gc-new', auto_created: true }).execute();
    await backdate(['gc-explicit', 'gc-paused', 'gc-live', 'gc-claimed', 'gc-recent']);
    const result = await collectIdleQueues(database.db, IDLE, 100);
    for (const name of ['gc-explicit', 'gc-paused', 'gc-live', 'gc-claimed', 'gc-recent', 'gc-new']) {
      expect(result.removed).not.toContain(name);
      expect(await queueExists(name)).toBe(true);
    }
  });

  it('skips a queue an enqueue is holding right now', async () => {
    await database.db.insertInto('baton.queues').values({ name: 'gc-held', auto_created: true }).execute();
    await backdate(['gc-held']);
    await database.db.transaction().execute(async (trx) => {
      await sql`SELECT 1 FROM baton.queues WHERE name = 'gc-held' FOR KEY SHARE`.execute(trx);
      const result = await collectIdleQueues(database.db, IDLE, 100);
      expect(result.removed).not.toContain('gc-held');
    });
    expect(await queueExists('gc-held')).toBe(true);
  });

  it('an enqueue racing the GC never fails, never strands and never loses its job; the queue is back', async () => {
    let removed = 0;
    for (let round = 0; round < 5; round++) {
      const names = Array.from({ length: 40 }, (_, i) => `gc-race-${round}-${i}`);
      await database.db
        .insertInto('baton.queues')
        .values(names.map((name) => ({ name, auto_created: true })))
        .execute();
      await backdate(names);
      const [enqueues, gc1, gc2] = await Promise.all([
        Promise.all(
          names.flatMap((name) => [
            api(app).enqueue(name, { payload: name }),
            api(app).enqueueBatch(name, [{ payload: 1 }, { payload: 2 }]),
            api(app).enqueue(name, { payload: 3, idempotency_key: `k-${name}` }),
          ]),
        ),
        collectIdleQueues(database.db, IDLE, 100),
        collectIdleQueues(database.db, IDLE, 100),
      ]);
      removed += gc1.removed.length + gc2.removed.length;
      expect(enqueues.every((r) => r.status === 201)).toBe(true);
      // Every job is live, and the queue of every live job exists.
      const jobs = await sql<{ n: number }>`
        SELECT count(*)::int AS n FROM baton.jobs WHERE queue = ANY(${names}::text[])`.execute(database.db);
      expect(jobs.rows[0]!.n).toBe(names.length * 4);
      const stranded = await sql<{ queue: string }>`
        SELECT DISTINCT j.queue FROM baton.jobs j LEFT JOIN baton.queues q ON q.name = j.queue
        WHERE q.name IS NULL`.execute(database.db);
      expect(stranded.rows).toEqual([]);
      for (const name of names) expect(await queueExists(name)).toBe(true);
    }
    // The race really happened: the GC removed queues that enqueues then brought back.
    expect(removed).toBeGreaterThan(0);
  }, 60_000);
});
