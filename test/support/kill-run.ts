import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'vitest';
import { until } from './until.js';
import type { WorkerProcess } from './worker-process.js';

/**
 * The kill test both worker libraries run (clients/{python,typescript}/test/kill.test.ts): `jobs`
 * jobs worked by worker processes that are SIGKILLed at random and replaced, under short leases
 * and a leader re-arming expired ones. Each worker writes a ledger line per handler start
 * ({event: 'start', id, attempt, pid, lease_expires_at}) straight to its file in `dir`, so a kill
 * loses none of it, and answers {pid, attempt, ...} as the result. Asserts that no job was lost or
 * completed twice, that each was completed by its last runner, and that a job ran again only when
 * its runner was killed, and only after that runner's lease expired. Logs what happened.
 */
export interface KillRun {
  /** Requests as an admin, through the app. */
  admin: (method: 'GET' | 'POST', url: string, body?: object) => Promise<any>;
  queue: string;
  jobs: number;
  processes: number;
  leaseMs: number;
  /** Folder of the ledgers: one file per worker started. */
  dir: string;
  /** Start worker number `n` on the queue, with this lease, writing its ledger to `ledger`. */
  start: (n: number, ledger: string) => WorkerProcess;
}

interface Start {
  event: string;
  id: string;
  attempt: number;
  pid: number;
  lease_expires_at: string;
}

export async function killRun(run: KillRun): Promise<void> {
  const { admin, queue, jobs: count, leaseMs, dir } = run;
  const ids: string[] = [];
  for (let n = 0; n < count; n += 1000) {
    const jobs = Array.from({ length: Math.min(1000, count - n) }, (_, i) => ({
      payload: { n: n + i, sleep_ms: 40 + ((n + i) % 7) * 20 },
    }));
    const answer = await admin('POST', `/v1/queues/${queue}/jobs/batch`, { jobs });
    ids.push(...answer.jobs.map((j: { id: string }) => j.id));
  }
  const read = async () => {
    const answers = [];
    for (let i = 0; i < ids.length; i += 1000)
      answers.push(await admin('POST', '/v1/jobs/await', { ids: ids.slice(i, i + 1000) }));
    return answers;
  };
  const finished = async () => (await read()).reduce((sum, answer) => sum + answer.finished, 0);

  let started = 0;
  const start = () => {
    const n = started++;
    return run.start(n, path.join(dir, `kill-${n}.jsonl`));
  };
  const workers = Array.from({ length: run.processes }, start);
  const killed = new Set<number>();
  const began = Date.now();
  try {
    // Kill one at random every 1 to 2.5 s, and start another in its place, until every job is done.
    while ((await finished()) < count) {
      await new Promise((r) => setTimeout(r, 1000 + Math.random() * 1500));
      const slot = Math.floor(Math.random() * workers.length);
      const victim = workers[slot]!;
      victim.child.kill('SIGKILL');
      await victim.exited;
      killed.add(victim.child.pid!);
      workers[slot] = start();
    }
    await until(async () => (await finished()) === count, 60_000);
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
  const jobs = (await read()).flatMap((answer) => answer.jobs);
  expect(jobs).toHaveLength(count);
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
      const reclaimedAt = Date.parse(ran[i + 1]!.lease_expires_at) - leaseMs;
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
    `kill test (${queue}): ${count} jobs, ${killed.size} workers SIGKILLed, ${ranTwice} jobs run again after a kill, ` +
      `${jobs.filter((j) => j.attempts > 1).length} redelivered, ${((Date.now() - began) / 1000).toFixed(1)} s`,
  );
  expect(killed.size).toBeGreaterThanOrEqual(5);
  expect(ranTwice).toBeGreaterThan(0);
}

/** A temporary folder for one test file's ledgers. */
export function ledgerFolder(prefix: string): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix));
}
