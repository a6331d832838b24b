import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { BatonApp } from '../../../src/app.js';
import { useTestDatabase } from '../../../test/support/database.js';
import { until } from '../../../test/support/until.js';
import { admin, pythonEnv, startBaton, startPythonWorker } from './harness.js';

/**
 * 5,000 jobs worked by Python worker processes (tests/scripts/ledger_worker.py) that are SIGKILLed
 * at random and replaced, under 2 s leases and a leader re-arming expired ones every 500 ms. Every
 * handler run is in a ledger written straight to disk, so a kill loses none of it.
 */
const database = useTestDatabase();
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'baton-py-kill-'));
let app: BatonApp;
let url: string;
beforeAll(async () => {
  ({ app, url } = await startBaton(database));
});
afterAll(async () => {
  await app?.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

const JOBS = 5000;
const PROCESSES = 3;
const LEASE_MS = 2000;

interface Start {
  event: string;
  id: string;
  attempt: number;
  pid: number;
  lease_expires_at: string;
}

it('SIGKILLed workers lose no job and complete none twice; a job runs again only after its killed runner’s lease expired', async () => {
  const q = 'py-kill';
  const ids: string[] = [];
  for (let n = 0; n < JOBS; n += 1000) {
    const jobs = Array.from({ length: 1000 }, (_, i) => ({
      payload: { n: n + i, sleep_ms: 40 + ((n + i) % 7) * 20 },
    }));
    ids.push(
      ...(await admin(app, 'POST', `/v1/queues/${q}/jobs/batch`, { jobs })).jobs.map(
        (j: { id: string }) => j.id,
      ),
    );
  }
  const start = (n: number) =>
    startPythonWorker(
      'ledger_worker.py',
      pythonEnv(url, {
        QUEUE: q,
        CONCURRENCY: '6',
        LEASE_MS: String(LEASE_MS),
        WORKER_ID: `kill-${n}`,
        LEDGER: path.join(dir, `kill-${n}.jsonl`),
      }),
    );
  const finished = async () => {
    let count = 0;
    for (let i = 0; i < ids.length; i += 1000) {
      count += (await admin(app, 'POST', '/v1/jobs/await', { ids: ids.slice(i, i + 1000) })).finished;
    }
    return count;
  };

  let started = 0;
  const workers = Array.from({ length: PROCESSES }, () => start(started++));
  const killed = new Set<number>();
  const began = Date.now();
  try {
    // Kill one at random every 1 to 2.5 s, and start another in its place, until every job is done.
    while ((await finished()) < JOBS) {
      await new Promise((r) => setTimeout(r, 1000 + Math.random() * 1500));
      const slot = Math.floor(Math.random() * workers.length);
      const victim = workers[slot]!;
      victim.child.kill('SIGKILL');
      await victim.exited;
      killed.add(victim.child.pid!);
      workers[slot] = start(started++);
    }
    await until(async () => (await finished()) === JOBS, 60_000);
  } finally {
    for (const w of workers) w.child.kill('SIGTERM');
    await Promise.all(workers.map((w) => w.exited));
    for (const w of workers) w.child.kill('SIGKILL');
  }

  const runs = new Map<string, Start[]>();
  for (const file of fs.readdirSync(dir)) {
    for (const line of fs.readFileSync(path.join(dir, file), 'utf8').split('\n').filter(Boolean)) {
      const entry = JSON.parse(line) as Start;
      if (entry.event === 'start') runs.set(entry.id, [...(runs.get(entry.id) ?? []), entry]);
    }
  }
  const jobs = [];
  for (let i = 0; i < ids.length; i += 1000) {
    jobs.push(...(await admin(app, 'POST', '/v1/jobs/await', { ids: ids.slice(i, i + 1000) })).jobs);
  }
  let ranTwice = 0;
  for (const job of jobs) {
    const where = `job ${job.id}`;
    // Completed, once, by the last handler that ran it.
    expect(job.state, where).toBe('completed');
    const ran = (runs.get(job.id) ?? []).sort((a, b) => a.attempt - b.attempt);
    expect(ran.length, where).toBeGreaterThan(0);
    const last = ran.at(-1)!;
    expect(job.result, where).toMatchObject({ pid: last.pid, attempt: last.attempt });
    expect(job.attempts, where).toBe(last.attempt);
    // An earlier run: its process was killed, and the job was claimed again only after that
    // run's lease ran out (each lease start is its expiry less its length, by the server's clock).
    for (const [i, earlier] of ran.slice(0, -1).entries()) {
      expect(killed.has(earlier.pid), `${where}: run by ${earlier.pid}, not killed`).toBe(true);
      const reclaimedAt = Date.parse(ran[i + 1]!.lease_expires_at) - LEASE_MS;
      expect(reclaimedAt, where).toBeGreaterThanOrEqual(Date.parse(earlier.lease_expires_at));
    }
    // Every attempt before the last ended with its lease expiring: nothing was nacked or lost.
    expect(
      job.errors.map((e: { reason?: string }) => e.reason),
      where,
    ).toEqual(Array.from({ length: job.attempts - 1 }, () => 'lease_expired'));
    if (ran.length > 1) ranTwice++;
  }
  console.log(
    `kill test: ${JOBS} jobs, ${killed.size} workers SIGKILLed, ${ranTwice} jobs run again after a kill, ` +
      `${jobs.filter((j) => j.attempts > 1).length} redelivered, ${((Date.now() - began) / 1000).toFixed(1)} s`,
  );
  expect(killed.size).toBeGreaterThanOrEqual(5);
  expect(ranTwice).toBeGreaterThan(0);
}, 180_000);
