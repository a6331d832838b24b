import { describe, expect, it } from 'vitest';
import { useTestDatabase } from '../support/database.js';
import { freePort } from '../support/ports.js';
import { ServerProcess } from '../support/server-process.js';

const database = useTestDatabase();
const JOBS = 3000;

interface Claimed {
  id: string;
  lease_token: string;
}

describe('graceful shutdown of a real server process', () => {
  it('SIGTERM during a claim/ack loop loses no acknowledged job and runs no completed job again', async () => {
    const port = await freePort();
    const env = { DATABASE_URL: database.url, BATON_TICK_MS: '500', BATON_SHUTDOWN_TIMEOUT_MS: '5000' };
    let server = await ServerProcess.start(env, port);
    const base = server.url;
    const post = (path: string, body: unknown) =>
      fetch(`${base}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });

    for (let i = 0; i < JOBS; i += 100) {
      const res = await post('/v1/queues/drain/jobs/batch', {
        jobs: Array.from({ length: 100 }, (_, j) => ({ payload: i + j })),
      });
      expect(res.status).toBe(201);
    }

    // The ledger: every claim and every ack answer, with the time it was seen.
    const claims: { id: string; at: number }[] = [];
    const acks: { id: string; status: number; at: number }[] = [];
    let done = false;
    const worker = async () => {
      while (!done) {
        let jobs: Claimed[];
        try {
          const res = await post('/v1/queues/drain/claim', { max_jobs: 5, lease_ms: 2000, wait_ms: 500 });
          if (res.status !== 200) throw new Error(String(res.status));
          jobs = ((await res.json()) as { jobs: Claimed[] }).jobs;
        } catch {
          await new Promise((r) => setTimeout(r, 50));
          continue;
        }
        // Claimed when the answer arrived (not when the worker reaches the job: it may spend seconds
        // retrying an earlier job's ack while the server restarts, and meanwhile this job's lease can
        // expire, be re-armed, claimed and acked by another worker).
        const answeredAt = Date.now();
        for (const job of jobs) claims.push({ id: job.id, at: answeredAt });
        for (const job of jobs) {
          await new Promise((r) => setTimeout(r, Math.random() * 10));
          // Retry the ack while the server is away; a 409 means the lease was re-armed meanwhile.
          for (let attempt = 0; attempt < 100; attempt++) {
            try {
              const res = await post(`/v1/jobs/${job.id}/ack`, { lease_token: job.lease_token });
              acks.push({ id: job.id, status: res.status, at: Date.now() });
              if (res.status === 200 || res.status === 409) break;
            } catch {
              acks.push({ id: job.id, status: 0, at: Date.now() });
            }
            await new Promise((r) => setTimeout(r, 50));
          }
        }
      }
    };
    const workers = Array.from({ length: 8 }, worker);

    // SIGTERM once the loop is well under way.
    while (acks.filter((a) => a.status === 200).length < 200) await new Promise((r) => setTimeout(r, 10));
    const acksBefore = acks.filter((a) => a.status === 200).length;
    expect(acksBefore).toBeGreaterThan(0);
    expect(acksBefore).toBeLessThan(JOBS);
    const signalledAt = Date.now();
    server.signal('SIGTERM');
    expect(await server.exited).toBe(0);
    expect(Date.now() - signalledAt).toBeLessThan(10_000);

    server = await ServerProcess.start(env, port);
    try {
      const deadline = Date.now() + 60_000;
      while (
        new Set(acks.filter((a) => a.status === 200).map((a) => a.id)).size < JOBS &&
        Date.now() < deadline
      ) {
        await new Promise((r) => setTimeout(r, 100));
      }
      done = true;
      await Promise.all(workers);
    } finally {
      server.signal('SIGTERM');
      await server.exited;
    }

    const accepted = acks.filter((a) => a.status === 200);
    const acceptedIds = new Set(accepted.map((a) => a.id));
    // Every job was acknowledged exactly once...
    expect(acceptedIds.size).toBe(JOBS);
    expect(accepted).toHaveLength(JOBS);
    // ...and every acknowledged job is completed in the database.
    const completed = await database.db
      .selectFrom('baton.job_history')
      .select('id')
      .where('queue', '=', 'drain')
      .where('state', '=', 'completed')
      .execute();
    expect(new Set(completed.map((r) => r.id))).toEqual(acceptedIds);
    const live = await database.db
      .selectFrom('baton.jobs')
      .select('id')
      .where('queue', '=', 'drain')
      .execute();
    expect(live).toHaveLength(0);
    // No completed job ran again: no claim of a job after its accepted ack.
    const ackedAt = new Map(accepted.map((a) => [a.id, a.at]));
    expect(claims.filter((c) => c.at > ackedAt.get(c.id)!)).toEqual([]);
  }, 120_000);
});
