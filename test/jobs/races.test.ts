import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { rearmExpiredLeases } from '../../src/maintenance/rearm.js';
import { useTestApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { api, enqueueAndClaimMany } from '../support/http.js';

const database = useTestDatabase();
const app = useTestApp(database);

describe('racing writes on one lease', () => {
  it('ack, nack, renew, cancel and re-arm all at once: one winner per job, every job in exactly one place', async () => {
    const q = 'race-all';
    const jobs = await enqueueAndClaimMany(app, q, 60, { lease_ms: 1000 });
    // Half the leases have already run out, so the re-arm races too.
    await sql`UPDATE baton.jobs SET lease_expires_at = now() - interval '1 ms'
              WHERE id = ANY(${jobs.filter((_, i) => i % 2).map((j) => j.id)}::bigint[])`.execute(
      database.db,
    );

    const outcomes = await Promise.all(
      jobs.map(async (job) => {
        const body = { lease_token: job.lease_token };
        const [ack, nack, renew, cancel] = await Promise.all([
          api(app).ack(job.id, body),
          api(app).nack(job.id, { ...body, retry_in_ms: 60_000 }),
          api(app).renew(job.id, body),
          api(app).cancel(job.id),
          rearmExpiredLeases(database.db, 100),
        ]);
        return { id: job.id, ack: ack.status, nack: nack.status, renew: renew.status, cancel: cancel.status };
      }),
    );

    const live = await sql<{ id: string; state: string }>`
      SELECT id::text, state FROM baton.jobs WHERE queue = ${q}`.execute(database.db);
    const finished = await sql<{ id: string; state: string }>`
      SELECT id::text, state FROM baton.job_history WHERE queue = ${q}`.execute(database.db);
    // A nack with a delay moves the job to scheduled_jobs: a place too (the check once missed it, and
    // failed whenever the nack won the race).
    const scheduled = await sql<{ id: string; state: string }>`
      SELECT id::text, 'scheduled' AS state FROM baton.scheduled_jobs WHERE queue = ${q}`.execute(
      database.db,
    );
    const where = new Map<string, string[]>();
    for (const r of [...live.rows, ...finished.rows, ...scheduled.rows]) {
      where.set(r.id, [...(where.get(r.id) ?? []), r.state]);
    }
    for (const o of outcomes) {
      const states = where.get(o.id) ?? [];
      // Exactly one row, in one table.
      expect(states, o.id).toHaveLength(1);
      const state = states[0]!;
      for (const status of [o.ack, o.nack, o.renew, o.cancel]) expect([200, 409]).toContain(status);
      // Ack and nack both need the live lease: at most one of them can have won.
      expect(o.ack === 200 && o.nack === 200, JSON.stringify(o)).toBe(false);
      if (o.ack === 200) expect(state).toBe('completed');
      if (state === 'completed') expect(o.ack).toBe(200);
      if (state === 'cancelled') expect(o.cancel).toBe(200);
      if (o.cancel === 200) expect(state).toBe('cancelled');
      if (state === 'scheduled') expect(o.nack).toBe(200);
    }
  });

  it('batch renewals racing the re-arm, a batch ack and each other: a renewed lease is never re-armed or lost', async () => {
    const q = 'race-renew';
    const jobs = await enqueueAndClaimMany(app, q, 200, { lease_ms: 1000 });
    // Every lease has just run out: each renewal races the leader's re-arm for its job.
    await sql`UPDATE baton.jobs SET lease_expires_at = now() - interval '1 ms'
              WHERE id = ANY(${jobs.map((j) => j.id)}::bigint[])`.execute(database.db);
    const items = jobs.map((j) => ({ id: j.id, lease_token: j.lease_token, lease_ms: 60_000 }));
    const reversed = [...items].reverse();
    // A worker acks the first quarter while its renew timer fires twice, in different orders.
    const acked = jobs.slice(0, 50).map((j) => ({ id: j.id, lease_token: j.lease_token }));
    const [renewA, renewB, ack] = await Promise.all([
      api(app).renewBatch(items),
      api(app).renewBatch(reversed),
      api(app).ackBatch(acked),
      rearmExpiredLeases(database.db, 60),
      rearmExpiredLeases(database.db, 60),
    ]);
    expect([renewA.status, renewB.status, ack.status]).toEqual([200, 200, 200]);

    const rows = await sql<{ id: string; state: string; lease_token: string | null }>`
      SELECT id::text, state, lease_token::text FROM baton.jobs WHERE queue = ${q}
      UNION ALL SELECT id::text, state, NULL FROM baton.job_history WHERE queue = ${q}`.execute(database.db);
    const byId = new Map<string, { state: string; lease_token: string | null }[]>();
    for (const r of rows.rows) byId.set(r.id, [...(byId.get(r.id) ?? []), r]);
    const outcome = (res: typeof renewA, id: string) =>
      res.body.results.find((r: { id: string }) => r.id === id).outcome as string;
    for (const [i, job] of jobs.entries()) {
      const found = byId.get(job.id) ?? [];
      expect(found, job.id).toHaveLength(1);
      const { state, lease_token } = found[0]!;
      const renewed = outcome(renewA, job.id) === 'renewed' || outcome(renewB, job.id) === 'renewed';
      const ackedIt = i < 50 && ack.body.results[i].outcome === 'acked';
      if (ackedIt) expect(state).toBe('completed');
      else if (renewed) {
        // Renewed and not acked: still claimed under the same lease, not re-armed.
        expect({ state, lease_token }).toEqual({ state: 'claimed', lease_token: job.lease_token });
      } else expect(state).toBe('ready'); // the re-arm won; its renewals were lease_lost
      for (const res of [renewA, renewB]) expect(['renewed', 'lease_lost']).toContain(outcome(res, job.id));
    }
  });

  it('a burst of claims and acks from many clients completes each job once', async () => {
    const q = 'race-burst';
    const acked: string[] = [];
    const producer = (async () => {
      for (let b = 0; b < 20; b++)
        await api(app).enqueueBatch(
          q,
          Array.from({ length: 50 }, (_, i) => ({ payload: b * 50 + i })),
        );
    })();
    let producing = true;
    void producer.then(() => {
      producing = false;
    });
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        while (true) {
          const jobs = (await api(app).claim(q, { max_jobs: 7, wait_ms: producing ? 200 : 0 })).body.jobs;
          if (jobs.length === 0 && !producing) return;
          // A long-poll that timed out while the producer lagged (a loaded machine): nothing to ack.
          if (jobs.length === 0) continue;
          const res = await api(app).ackBatch(
            jobs.map((j: { id: string; lease_token: string }) => ({ id: j.id, lease_token: j.lease_token })),
          );
          for (const r of res.body.results) if (r.outcome === 'acked') acked.push(r.id);
        }
      }),
    );
    expect(acked).toHaveLength(1000);
    expect(new Set(acked).size).toBe(1000);
    const done = await sql<{ n: number }>`
      SELECT count(*)::int AS n FROM baton.job_history WHERE queue = ${q} AND state = 'completed'`.execute(
      database.db,
    );
    expect(done.rows[0]!.n).toBe(1000);
  });
});
