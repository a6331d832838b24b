import fs from 'node:fs';
import { afterAll, beforeAll, it } from 'vitest';
import type { BatonApp } from '../../../src/app.js';
import { useTestDatabase } from '../../../test/support/database.js';
import { killRun, ledgerFolder } from '../../../test/support/kill-run.js';
import { admin, pythonEnv, startBaton, startPythonWorker } from './harness.js';

/**
 * 5,000 jobs worked by Python worker processes (tests/scripts/ledger_worker.py) that are SIGKILLed
 * at random and replaced, under 2 s leases and a leader re-arming expired ones every 500 ms
 * (test/support/kill-run.ts holds the run and its assertions, shared with the TypeScript library).
 */
const database = useTestDatabase();
const dir = ledgerFolder('baton-py-kill-');
let app: BatonApp;
let url: string;
beforeAll(async () => {
  ({ app, url } = await startBaton(database));
});
afterAll(async () => {
  await app?.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

it('SIGKILLed workers lose no job and complete none twice; a job runs again only after its killed runner’s lease expired', async () => {
  await killRun({
    admin: (method, path, body) => admin(app, method, path, body),
    queue: 'py-kill',
    jobs: 5000,
    processes: 3,
    leaseMs: 2000,
    dir,
    start: (n, ledger) =>
      startPythonWorker(
        'ledger_worker.py',
        pythonEnv(url, {
          QUEUE: 'py-kill',
          CONCURRENCY: '6',
          LEASE_MS: '2000',
          WORKER_ID: `kill-${n}`,
          LEDGER: ledger,
        }),
      ),
  });
}, 180_000);
