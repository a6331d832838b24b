/**
 * A Baton worker in TypeScript, on the library in clients/typescript (no dependencies).
 *
 *   BATON_URL=http://127.0.0.1:8080 QUEUE=emails npm run worker
 *
 * (`npm run worker` execs Node, so a SIGTERM to npm reaches this process; `npx tsx` would not pass it on.)
 *
 * The library does the work (clients/typescript/README.md): it long-polls for up to CONCURRENCY
 * jobs, runs them side by side, renews every lease in one batch request, acks with the handler's
 * result and final progress (each ack claiming the job that takes its place), nacks with its error,
 * drops a job whose lease is lost, retries through outages, and on SIGTERM or SIGINT stops
 * claiming, lets the jobs in hand finish for up to DRAIN_MS, gives back the rest and exits 0.
 *
 * The handler below is a stand-in: replace it with your work. For the demo it understands payloads
 * like {"sleep_ms": 500}, {"steps": 3, "sleep_ms": 3000} (reports {"done": n, "of": 3} after each
 * step), {"fail": "message"} and {"dead": "message"}.
 *
 * Settings: BATON_URL, BATON_API_KEY (sent as a bearer token when set), QUEUE, CONCURRENCY (10),
 * LEASE_MS (30000), WAIT_MS (20000), DRAIN_MS (25000), WORKER_ID. Each event is a JSON line on stdout.
 */
import { setTimeout as sleep } from 'node:timers/promises';
// The library, from this repository; with the package installed, import from 'baton-client'.
import { PermanentFailure, Worker } from '../clients/typescript/src/index.js';

interface Demo {
  sleep_ms?: number;
  steps?: number;
  fail?: string;
  dead?: string;
}

const workerId = process.env.WORKER_ID ?? `ts-worker-${process.pid}`;
const setting = (name: string, fallback: number) => Number(process.env[name] ?? fallback);

const worker = new Worker<Demo | null>({
  queue: process.env.QUEUE ?? 'default',
  concurrency: setting('CONCURRENCY', 10),
  leaseMs: setting('LEASE_MS', 30_000),
  waitMs: setting('WAIT_MS', 20_000),
  drainMs: setting('DRAIN_MS', 25_000),
  workerId,
  logger: (level, event, fields) =>
    console.log(JSON.stringify({ at: new Date().toISOString(), level, event, ...fields })),
  handler: async (job, { signal, progress }) => {
    const payload = job.payload ?? {};
    const steps = payload.steps ?? 0;
    for (let done = 1; done <= steps; done++) {
      await sleep((payload.sleep_ms ?? 0) / steps, undefined, { signal }); // rejects if the lease is lost
      progress({ done, of: steps });
    }
    if (payload.sleep_ms && !steps) await sleep(payload.sleep_ms, undefined, { signal });
    if (payload.dead) throw new PermanentFailure(payload.dead);
    if (payload.fail) throw new Error(payload.fail);
    return { handled_by: workerId, attempt: job.attempt };
  },
});

await worker.run();
