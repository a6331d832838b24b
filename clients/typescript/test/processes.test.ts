import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BatonApp } from '../../../src/app.js';
import { createTestApp, listen } from '../../../test/support/app.js';
import { useTestDatabase } from '../../../test/support/database.js';
import { TcpProxy } from '../../../test/support/tcp-proxy.js';
import { until } from '../../../test/support/until.js';
import { workerScenarios } from '../../../test/support/worker-scenarios.js';
import { BatonError, Client } from '../src/index.js';
import { admin, eventLog, KEYS, SERVER_ENV, startBaton, startScript, workerEnv } from './harness.js';

/**
 * The TypeScript library's worker as a process (test/scripts/ledger-worker.ts) and its client
 * through outages, against a real Baton: SIGTERM's drain and give back, a lease lost while the
 * worker could not reach Baton and connections dropped by a proxy (test/support/worker-scenarios.ts,
 * shared with the Python library), 503s while the database is down, and 429 with Retry-After.
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
  library: 'TypeScript',
  url: () => url,
  admin: (method, path, body) => admin(app, method, path, body),
  start: (baseUrl, env) => startScript('ledger-worker.ts', workerEnv(baseUrl, env)),
  connectionRetry: (event) => event.code === 'connection_failed' && event.status === 0,
});

describe('the TypeScript client through outages', () => {
  it('while the database is down (503), an enqueue without an idempotency key fails at once and one with a key is retried until it lands, once', async () => {
    const databaseProxy = await TcpProxy.start(database.url);
    const outageApp = await createTestApp({ url: databaseProxy.urlFor(database.url) }, SERVER_ENV);
    const log = eventLog();
    const baton = new Client({ url: await listen(outageApp), apiKey: KEYS.producer, logger: log.logger });
    const q = 'ts-503';
    try {
      await databaseProxy.cut();
      const refused = await baton.enqueue(q, { n: 1 }).catch((err: unknown) => err);
      expect(refused).toBeInstanceOf(BatonError);
      expect(refused).toMatchObject({ status: 503, code: 'unavailable' });
      expect(log.named('request_retry')).toEqual([]);

      const landing = baton.enqueue(q, { n: 2 }, { idempotency_key: 'through-the-outage' });
      await until(() => log.named('request_retry').length > 0, 15_000);
      const retry = log.named('request_retry')[0]!;
      expect(retry).toMatchObject({ method: 'POST', status: 503, code: 'unavailable' });
      // After Retry-After (1 s), plus up to a fifth more.
      expect(retry.delay_ms).toBeGreaterThanOrEqual(1000);
      expect(retry.delay_ms).toBeLessThanOrEqual(1200);
      await databaseProxy.restore();
      const landed = await landing;
      expect(landed.state).toBe('ready');
      const listed = await admin(app, 'GET', `/v1/queues/${q}/jobs?state=ready&limit=10`);
      expect(listed.jobs.map((j: { id: string }) => j.id)).toEqual([landed.id]);
    } finally {
      baton.close();
      await outageApp.close();
      await databaseProxy.close();
    }
  }, 60_000);

  it('a 429 (too many waiters for its key) is retried after Retry-After', async () => {
    const capped = await createTestApp(database, { ...SERVER_ENV, BATON_AWAIT_MAX_WAITERS_PER_KEY: '1' });
    const cappedUrl = await listen(capped);
    const log = eventLog();
    const baton = new Client({ url: cappedUrl, apiKey: KEYS.producer, logger: log.logger });
    const q = 'ts-429';
    try {
      const { jobs } = await admin(app, 'POST', `/v1/queues/${q}/jobs/batch`, {
        jobs: [{ payload: { n: 1 } }, { payload: { n: 2 } }],
      });
      const [live, done] = jobs.map((j: { id: string }) => j.id);
      await admin(app, 'POST', `/v1/jobs/${done}/cancel`);
      // The key's one waiter: an await of a job that will not finish, for three seconds.
      const holding = fetch(`${cappedUrl}/v1/jobs/${live}?wait_ms=3000`, {
        headers: { authorization: `Bearer ${KEYS.producer}` },
      }).then((res) => res.arrayBuffer());
      await until(async () => {
        const res = await fetch(`${cappedUrl}/v1/jobs/${done}?wait_ms=1`, {
          headers: { authorization: `Bearer ${KEYS.producer}` },
        });
        await res.arrayBuffer();
        return res.status === 429;
      });
      const waited = await baton.await(done);
      await holding;
      expect(waited.state).toBe('cancelled');
      const retries = log.named('request_retry');
      expect(retries.length).toBeGreaterThan(0);
      for (const retry of retries) {
        expect(retry).toMatchObject({ status: 429, code: 'too_many_waiters' });
        expect(retry.delay_ms).toBeGreaterThanOrEqual(1000);
      }
    } finally {
      baton.close();
      await capped.close();
    }
  }, 60_000);
});
