import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BatonApp } from '../../../src/app.js';
import { createTestApp, listen } from '../../../test/support/app.js';
import { useTestDatabase } from '../../../test/support/database.js';
import { TcpProxy } from '../../../test/support/tcp-proxy.js';
import { until } from '../../../test/support/until.js';
import { workerScenarios } from '../../../test/support/worker-scenarios.js';
import { admin, KEYS, pythonEnv, SERVER_ENV, startBaton, startPythonWorker } from './harness.js';

/**
 * The Python library's worker as a process (tests/scripts/ledger_worker.py) and its client through
 * outages, against a real Baton: SIGTERM's drain and give back, a lease lost while the worker could
 * not reach Baton and connections dropped by a proxy (test/support/worker-scenarios.ts, shared with
 * the TypeScript library), 503s while the database is down, and 429 with Retry-After.
 */
const database = useTestDatabase();
let app: BatonApp;
let url: string;
beforeAll(async () => {
  ({ app, url } = await startBaton(database));
});
afterAll(async () => {
  await app?.close();
});

workerScenarios({
  library: 'Python',
  url: () => url,
  admin: (method, path, body) => admin(app, method, path, body),
  start: (baseUrl, env) => startPythonWorker('ledger_worker.py', pythonEnv(baseUrl, env)),
  connectionRetry: (event) => /Error/.test(event.reason),
});

const enqueue = async (queue: string, payloads: unknown[]): Promise<string[]> =>
  (
    await admin(app, 'POST', `/v1/queues/${queue}/jobs/batch`, {
      jobs: payloads.map((payload) => ({ payload })),
    })
  ).jobs.map((j: { id: string }) => j.id);

describe('the Python client through outages', () => {
  it('while the database is down (503), an enqueue without an idempotency key fails at once and one with a key is retried until it lands, once', async () => {
    const databaseProxy = await TcpProxy.start(database.url);
    const outageApp = await createTestApp({ url: databaseProxy.urlFor(database.url) }, SERVER_ENV);
    const outageUrl = await listen(outageApp);
    const q = 'py-503';
    try {
      await databaseProxy.cut();
      const script = startPythonWorker(
        'enqueue_through_outage.py',
        pythonEnv(outageUrl, { QUEUE: q, BATON_API_KEY: KEYS.producer }),
      );
      try {
        await until(
          () => script.events.some((e) => e.event === 'request_retry' && e.reason === 'http 503'),
          15_000,
        );
        expect(script.events.find((e) => e.event === 'without_key')).toMatchObject({
          status: 503,
          code: 'unavailable',
        });
        expect(script.events.find((e) => e.event === 'request_retry')).toMatchObject({ wait_s: 1 }); // Retry-After
        await databaseProxy.restore();
        expect(await script.exited).toBe(0);
      } finally {
        script.child.kill('SIGKILL');
      }
      const landed = script.events.find((e) => e.event === 'with_key');
      expect(landed).toMatchObject({ state: 'ready' });
      const listed = await admin(app, 'GET', `/v1/queues/${q}/jobs?state=ready&limit=10`);
      expect(listed.jobs.map((j: { id: string }) => j.id)).toEqual([landed!.id]);
    } finally {
      await outageApp.close();
      await databaseProxy.close();
    }
  }, 60_000);

  it('a 429 (too many waiters for its key) is retried after Retry-After', async () => {
    const capped = await createTestApp(database, { ...SERVER_ENV, BATON_AWAIT_MAX_WAITERS_PER_KEY: '1' });
    const cappedUrl = await listen(capped);
    const q = 'py-429';
    try {
      const [live, done] = await enqueue(q, [{ n: 1 }, { n: 2 }]);
      await admin(app, 'POST', `/v1/jobs/${done}/cancel`);
      // The key's one waiter: an await of a job that will not finish, for three seconds.
      const holding = fetch(`${cappedUrl}/v1/jobs/${live}?wait_ms=3000`, {
        headers: { authorization: `Bearer ${KEYS.producer}` },
      });
      await until(async () => {
        const res = await fetch(`${cappedUrl}/v1/jobs/${done}?wait_ms=1`, {
          headers: { authorization: `Bearer ${KEYS.producer}` },
        });
        await res.arrayBuffer();
        return res.status === 429;
      });
      const script = startPythonWorker(
        'wait_for_job.py',
        pythonEnv(cappedUrl, { JOB_ID: done!, BATON_API_KEY: KEYS.producer }),
      );
      try {
        expect(await script.exited).toBe(0);
      } finally {
        script.child.kill('SIGKILL');
      }
      await holding;
      const retries = script.events.filter((e) => e.event === 'request_retry');
      expect(retries.length).toBeGreaterThan(0);
      expect(retries.every((e) => e.reason === 'http 429' && e.wait_s === 1)).toBe(true);
      expect(script.events.at(-1)).toEqual({ event: 'waited', state: 'cancelled' });
    } finally {
      await capped.close();
    }
  }, 60_000);
});
