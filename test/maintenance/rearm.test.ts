import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { ackEach } from '../../src/jobs/ack.js';
import { renewLease } from '../../src/jobs/renew.js';
import { oldestExpiredLeaseSeconds, RearmDuty, rearmExpiredLeases } from '../../src/maintenance/rearm.js';
import { Metrics } from '../../src/metrics/metrics.js';
import { useTestApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { api, enqueueAndClaim } from '../support/http.js';

const database = useTestDatabase();
const app = useTestApp(database);

const expire = (ids: string[]) =>
  sql`UPDATE baton.jobs SET lease_expires_at = now() - interval '1 second' WHERE id = ANY(${ids}::bigint[])`.execute(
    database.db,
  );

async function stateOf(id: string) {
  return (await api(app).get(id)).body.state as string;
}

describe('re-arm', () => {
  it('returns an expired lease to ready and leaves a live one alone', async () => {
    const expired = await enqueueAndClaim(app, 'ra-basic');
    const live = await enqueueAndClaim(app, 'ra-basic');
    await expire([expired.id]);
    const result = await rearmExpiredLeases(database.db, 100);
    expect(result.ready.get('ra-basic')).toBe(1);
    expect(await stateOf(expired.id)).toBe('ready');
    expect(await stateOf(live.id)).toBe('claimed');
  });

  it('does not re-arm a lease renewed just before the tick', async () => {
    const job = await enqueueAndClaim(app, 'ra-renewed');
    await expire([job.id]);
    expect(await renewLease(database.db, { id: job.id, leaseToken: job.lease_token })).toMatchObject({
      outcome: 'done',
    });
    const result = await rearmExpiredLeases(database.db, 100);
    expect(result.total).toBe(0);
    expect(await stateOf(job.id)).toBe('claimed');
  });

  it('skips a job whose renewal is in flight, and leaves it claimed once that commits', async () => {
    const job = await enqueueAndClaim(app, 'ra-renewing');
    await expire([job.id]);
    await database.db.transaction().execute(async (trx) => {
      // The worker's renewal has taken the row lock but not committed when the reaper runs.
      await renewLease(trx, { id: job.id, leaseToken: job.lease_token });
      const during = await rearmExpiredLeases(database.db, 100);
      expect(during.total).toBe(0);
    });
    expect((await rearmExpiredLeases(database.db, 100)).total).toBe(0);
    expect(await stateOf(job.id)).toBe('claimed');
  });

  it('never touches a job acked between its read and its write: the job stays completed', async () => {
    const job = await enqueueAndClaim(app, 'ra-acking');
    await expire([job.id]);
    await database.db.transaction().execute(async (trx) => {
      const [done] = await ackEach(trx, [{ id: job.id, leaseToken: job.lease_token }]);
      expect(done?.state).toBe('completed');
      expect((await rearmExpiredLeases(database.db, 100)).total).toBe(0);
    });
    expect((await rearmExpiredLeases(database.db, 100)).total).toBe(0);
    expect(await stateOf(job.id)).toBe('completed');
  });

  it('when the re-arm commits first, the late worker’s ack is refused with 409 and the job is ready', async () => {
    const job = await enqueueAndClaim(app, 'ra-late-ack');
    await expire([job.id]);
    let ack: Promise<{ status: number }> | undefined;
    await database.db.transaction().execute(async (trx) => {
      expect((await rearmExpiredLeases(trx, 100)).total).toBe(1);
      // The worker acks while the re-arm is still uncommitted: its DELETE waits for our row lock.
      ack = api(app).ack(job.id, { lease_token: job.lease_token });
      await new Promise((r) => setTimeout(r, 100));
    });
    expect((await ack!).status).toBe(409);
    expect(await stateOf(job.id)).toBe('ready');
  });

  it('four reapers at once over the same expired set re-arm each job exactly once', async () => {
    const q = 'ra-four';
    await api(app).enqueueBatch(
      q,
      Array.from({ length: 600 }, (_, i) => ({ payload: i })),
    );
    const jobs = (await api(app).claim(q, { max_jobs: 600 })).body.jobs as { id: string }[];
    await expire(jobs.map((j) => j.id));
    const results = await Promise.all(
      Array.from({ length: 4 }, async () => {
        let total = 0;
        while (true) {
          const r = await rearmExpiredLeases(database.db, 50);
          total += r.total;
          if (r.total === 0) return total;
        }
      }),
    );
    expect(results.reduce((a, b) => a + b, 0)).toBe(600);
    const rows = await sql<{ state: string; n: number; errs: number }>`
      SELECT state, count(*)::int AS n, max(jsonb_array_length(errors))::int AS errs
      FROM baton.jobs WHERE queue = ${q} GROUP BY state`.execute(database.db);
    // Each job re-armed once: ready, and exactly one "lease expired" entry in its history.
    expect(rows.rows).toEqual([{ state: 'ready', n: 600, errs: 1 }]);
  });

  it('dead-letters a job on its last attempt with reason lease_expired', async () => {
    const job = await enqueueAndClaim(app, 'ra-last', { payload: 1, max_attempts: 1 });
    await expire([job.id]);
    const result = await rearmExpiredLeases(database.db, 100);
    expect(result.dead.get('ra-last')).toBe(1);
    const got = (await api(app).get(job.id)).body;
    expect(got).toMatchObject({ state: 'dead', dead_reason: 'lease_expired', attempts: 1 });
    expect(got.last_error).toMatchObject({ attempt: 1, message: 'lease expired' });
  });

  it('counts re-arms and reports the oldest expired lease', async () => {
    const metrics = new Metrics();
    const woken: [string, number][] = [];
    const duty = new RearmDuty(database.db, metrics, (q, n) => woken.push([q, n]), 5000);
    const job = await enqueueAndClaim(app, 'ra-metrics');
    await sql`UPDATE baton.jobs SET lease_expires_at = now() - interval '42 seconds' WHERE id = ${job.id}`.execute(
      database.db,
    );
    expect(await oldestExpiredLeaseSeconds(database.db)).toBeGreaterThanOrEqual(41);
    // The gauge is read after the run, when this job is no longer expired.
    await duty.runOnce();
    expect(woken).toContainEqual(['ra-metrics', 1]);
    const text = await metrics.registry.metrics();
    expect(text).toMatch(/baton_leases_rearmed_total\{outcome="ready"\} [1-9]/);
    expect(text).toMatch(/baton_oldest_expired_lease_seconds 0/);
    expect(duty.nextRunInMs(undefined)).toBe(5000);
  });
});
