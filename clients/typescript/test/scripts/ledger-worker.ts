/**
 * A worker process for the library's process tests: events as JSON lines on stdout, and a ledger
 * (LEDGER, one JSON line per handler start and end, appended straight to the file so that a SIGKILL
 * loses none) for the test to count what really ran.
 *
 * Payload: {"sleep_ms": n} works that long (ending early if the signal aborts); {"block": true}
 * runs until the lease is lost or the worker gives the job back.
 * Settings: QUEUE, CONCURRENCY, LEASE_MS, WAIT_MS, DRAIN_MS, WORKER_ID, LEDGER; BATON_URL and
 * BATON_API_KEY as for any client.
 */
import fs from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { Worker } from '../../src/index.js';

const workerId = process.env.WORKER_ID!;
const ledger = fs.openSync(process.env.LEDGER!, 'a');
const note = (fields: Record<string, unknown>) =>
  fs.writeSync(ledger, `${JSON.stringify({ worker: workerId, pid: process.pid, ...fields })}\n`);
const setting = (name: string, fallback: number) => Number(process.env[name] ?? fallback);

const worker = new Worker<{ block?: boolean; sleep_ms?: number } | null>({
  queue: process.env.QUEUE!,
  concurrency: setting('CONCURRENCY', 4),
  leaseMs: setting('LEASE_MS', 30_000),
  waitMs: setting('WAIT_MS', 1000),
  drainMs: setting('DRAIN_MS', 25_000),
  workerId,
  logger: (level, event, fields) => console.log(JSON.stringify({ level, event, ...fields })),
  handler: async (job, { signal }) => {
    note({ event: 'start', id: job.id, attempt: job.attempt, lease_expires_at: job.lease_expires_at });
    const waitMs = job.payload?.block ? 120_000 : (job.payload?.sleep_ms ?? 0);
    await sleep(waitMs, undefined, { signal }).catch(() => {});
    note({
      event: signal.aborted ? 'lost' : 'end',
      id: job.id,
      attempt: job.attempt,
      ...(signal.aborted ? { reason: String(signal.reason?.message ?? signal.reason) } : {}),
    });
    return { worker: workerId, pid: process.pid, attempt: job.attempt };
  },
});
await worker.run();
