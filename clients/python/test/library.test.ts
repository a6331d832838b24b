import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BatonApp } from '../../../src/app.js';
import { useTestDatabase } from '../../../test/support/database.js';
import { pythonEnv, runPython, startBaton } from './harness.js';

/**
 * The Python library's unittest suites (clients/python/tests), run against a real Baton and
 * PostgreSQL with API keys on and a leader re-arming expired leases: the client (every option,
 * graphs, awaits, errors, trace context) and the worker in process (results, progress, failures,
 * async handlers, lost leases, concurrency, drain and give back).
 */
const database = useTestDatabase();
let app: BatonApp;
let url: string;
beforeAll(async () => {
  // Push delivery on, to a receiver on this machine (tests/test_push.py).
  ({ app, url } = await startBaton(database, { BATON_PUSH: 'true', BATON_PUSH_ALLOW: '127.0.0.1' }));
});
afterAll(async () => {
  await app?.close();
});

async function unittest(module: string) {
  const run = await runPython(['-m', 'unittest', '-v', module], pythonEnv(url));
  // On failure the assertion shows Python's whole report.
  expect(run.code, `${run.stdout}\n${run.stderr}`).toBe(0);
  expect(run.stderr).toMatch(/\nOK\b/);
}

describe('clients/python', () => {
  it('client: enqueue options, batches and graphs, reads, awaits, cancel, errors, trace context (tests/test_client.py)', async () => {
    await unittest('tests.test_client');
  }, 120_000);

  it('worker: results, progress, failures, retry delays, async handlers, lost leases, concurrency, drain and give back (tests/test_worker.py)', async () => {
    await unittest('tests.test_worker');
  }, 180_000);

  it("push: verify_signature passes Baton's pushes, and fails a changed body, another secret or an old time (tests/test_push.py)", async () => {
    await unittest('tests.test_push');
  }, 60_000);
});
