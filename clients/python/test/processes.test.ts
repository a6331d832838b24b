import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BatonApp } from '../../../src/app.js';
import { createTestApp, listen } from '../../../test/support/app.js';
import { useTestDatabase } from '../../../test/support/database.js';
import { TcpProxy } from '../../../test/support/tcp-proxy.js';
import { until } from '../../../test/support/until.js';
import type { WorkerProcess } from '../../../test/support/worker-process.js';
import { admin, KEYS, pythonEnv, SERVER_ENV, startBaton, startPythonWorker } from './harness.js';

/**
 * The Python library's worker as a process (tests/scripts/ledger_worker.py) and its client through
 * outages, against a real Baton: SIGTERM's drain and give back, a lease lost while the worker could
 * not reach Baton, 503s while the database is down, connections dropped by a proxy, and 429 with
 * Retry-After. Each handler run is written to a ledger file, so what really ran is counted.
 */
const database = useTestDatabase();
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'baton-py-proc-'));
let app: BatonApp;
let url: string;
beforeAll(async () => {
  ({ app, url } = await startBaton(database));
});
afterAll(async () => {
  await app?.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

interface LedgerLine {
  event: 'start' | 'end' | 'lost';
  id: string;
  attempt: number;
  worker: string;
  pid: number;
  lease_expires_at?: string;
}

const readLedger = (file: string): LedgerLine[] =>
  fs.existsSync(file)
    ? fs
        .readFileSync(file, 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((line) => JSON.parse(line))
    : [];

function worker(queue: string, env: Record<string, string> = {}, baseUrl = url) {
  const name = `py-${queue}-${Math.random().toString(36).slice(2, 6)}`;
  const ledger = path.join(dir, `${name}.jsonl`);
  const process = startPythonWorker(
    'ledger_worker.py',
    pythonEnv(baseUrl, { QUEUE: queue, WORKER_ID: name, LEDGER: ledger, ...env }),
  );
  return { ...process, name, ledger: () => readLedger(ledger) };
}

const named = (w: WorkerProcess, event: string) => w.events.filter((e) => e.event === event);
const job = (id: string) => admin(app, 'GET', `/v1/jobs/${id}`);
const enqueue = async (queue: string, payloads: unknown[]): Promise<string[]> =>
  (
    await admin(app, 'POST', `/v1/queues/${queue}/jobs/batch`, {
      jobs: payloads.map((payload) => ({ payload })),
    })
  ).jobs.map((j: { id: string }) => j.id);

describe('the Python worker process', () => {
  it('on SIGTERM drains: short jobs finish and are acked, a long one is given back (ready at once, attempt uncounted) and another worker takes it long before its lease would have expired', async () => {
    const q = 'py-sigterm';
    const [long] = await enqueue(q, [{ block: true }]);
    const short = await enqueue(q, [{ sleep_ms: 400 }, { sleep_ms: 400 }, { sleep_ms: 400 }]);
    const first = worker(q, { CONCURRENCY: '4', LEASE_MS: '60000', DRAIN_MS: '1500' });
    let second: ReturnType<typeof worker> | undefined;
    try {
      await until(() => first.ledger().filter((l) => l.event === 'start').length === 4);
      first.child.kill('SIGTERM');
      expect(await first.exited).toBe(0);
      // The process ended while its long handler still had two minutes to run: it was told to stop.
      const lines = first.ledger();
      expect(lines.filter((l) => l.id === long).map((l) => l.event)).toEqual(['start', 'lost']);
      expect(named(first, 'gave_back').map((e) => e.id)).toEqual([long]);
      expect(first.events.map((e) => e.event)).toContain('stopping');
      expect(first.events.at(-1)).toMatchObject({ event: 'drained', gave_back: 1 });
      for (const id of short) expect(await job(id!)).toMatchObject({ state: 'completed', attempts: 1 });
      expect(await job(long!)).toMatchObject({ state: 'ready', attempts: 0 });

      second = worker(q, { CONCURRENCY: '1', LEASE_MS: '60000', DRAIN_MS: '100' });
      await until(() => second!.ledger().some((l) => l.id === long && l.event === 'start'));
      const firstLease = lines.find((l) => l.id === long && l.event === 'start')!;
      const again = second.ledger().find((l) => l.id === long && l.event === 'start')!;
      expect(again.attempt).toBe(1);
      // Claimed again (its new lease's start) before the first lease would have run out.
      const reclaimedAt = Date.parse(again.lease_expires_at!) - 60_000;
      expect(reclaimedAt).toBeLessThan(Date.parse(firstLease.lease_expires_at!));
      second.child.kill('SIGTERM');
      expect(await second.exited).toBe(0);
    } finally {
      first.child.kill('SIGKILL');
      second?.child.kill('SIGKILL');
    }
  }, 60_000);

  describe('through a proxy that drops its connections', () => {
    let proxy: TcpProxy;
    let proxied: string;
    beforeAll(async () => {
      proxy = await TcpProxy.start(url);
      proxied = `http://127.0.0.1:${proxy.port}`;
    });
    afterAll(async () => {
      await proxy?.close();
    });

    it('a lease lost while the worker could not reach Baton: the handler is told to stop, and this worker never acks the job that another now holds', async () => {
      const q = 'py-lost';
      const [id] = await enqueue(q, [{ block: true }]);
      const w = worker(q, { LEASE_MS: '2000' }, proxied);
      try {
        await until(() => w.ledger().some((l) => l.event === 'start'));
        await proxy.cut();
        // The lease runs out unrenewed; the leader re-arms the job, and another worker claims it.
        await until(async () => (await job(id!)).state === 'ready', 15_000);
        const claim = await admin(app, 'POST', `/v1/queues/${q}/claim`, { worker_id: 'the-other-worker' });
        expect(claim.jobs.map((j: { id: string }) => j.id)).toEqual([id]);
        await proxy.restore();
        await until(() => named(w, 'dropped').length === 1, 15_000);
        expect(w.ledger().map((l) => l.event)).toEqual(['start', 'lost']);
        expect(named(w, 'lease_lost')).toEqual([expect.objectContaining({ id, during: 'renew' })]);
        await admin(app, 'POST', `/v1/jobs/${id}/ack`, {
          lease_token: claim.jobs[0].lease_token,
          result: 'the other',
        });
        expect(await job(id!)).toMatchObject({ state: 'completed', result: 'the other', attempts: 2 });
        expect([...named(w, 'acked'), ...named(w, 'nacked')]).toEqual([]);
        w.child.kill('SIGTERM');
        expect(await w.exited).toBe(0);
      } finally {
        w.child.kill('SIGKILL');
        await proxy.restore();
      }
    }, 60_000);

    it('rides out dropped connections and a refusing server: every job completed, each handler run once', async () => {
      const q = 'py-drops';
      const ids = await enqueue(
        q,
        Array.from({ length: 80 }, () => ({ sleep_ms: 50 })),
      );
      const w = worker(q, { CONCURRENCY: '4', LEASE_MS: '5000' }, proxied);
      try {
        for (const acked of [10, 30, 50]) {
          await until(() => named(w, 'acked').length >= acked);
          await proxy.cut(); // every connection dropped, in the middle of acks and claims; new ones refused
          await until(() => named(w, 'request_retry').length >= acked / 10);
          await proxy.restore();
        }
        await until(
          async () => (await Promise.all(ids.map(job))).every((j) => j.state === 'completed'),
          30_000,
        );
        const jobs = await Promise.all(ids.map(job));
        const starts = w.ledger().filter((l) => l.event === 'start');
        // Each handler ran once, and each job was completed by it.
        expect(starts.map((l) => l.id).sort()).toEqual([...ids].sort());
        for (const j of jobs) {
          expect(j.result).toEqual({ worker: w.name, pid: w.child.pid, attempt: j.attempts });
          // A claim whose answer a dropped connection lost (an ack's `next`, say) came back only
          // when its lease ran out, unrun: the attempt before the one that ran is a lease_expired.
          if (j.attempts > 1)
            expect(j.errors.map((e: { reason?: string }) => e.reason)).toEqual(['lease_expired']);
        }
        expect(named(w, 'lease_lost')).toEqual([]);
        expect(named(w, 'request_retry').some((e) => /Error/.test(e.reason))).toBe(true);
        w.child.kill('SIGTERM');
        expect(await w.exited).toBe(0);
      } finally {
        w.child.kill('SIGKILL');
        await proxy.restore();
      }
    }, 60_000);
  });
});

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
