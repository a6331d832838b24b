import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TcpProxy } from './tcp-proxy.js';
import { until } from './until.js';
import type { WorkerProcess } from './worker-process.js';

/**
 * The worker-process scenarios both worker libraries pass (clients/{python,typescript}/test/
 * processes.test.ts), against a real Baton whose leader re-arms expired leases: SIGTERM's drain and
 * give back, a lease lost while the worker could not reach Baton, and connections dropped by a
 * proxy. Each library's ledger worker (tests/scripts/ledger_worker.py, test/scripts/ledger-worker.ts)
 * writes a line per handler start, end, or end after it was told to stop, so what really ran is
 * counted; its events are JSON lines on stdout, named alike in both libraries.
 */
export interface WorkerScenarios {
  /** Which library, for the test names. */
  library: string;
  /** Baton's URL and an admin request through its app (both ready once beforeAll has run). */
  url: () => string;
  admin: (method: 'GET' | 'POST', path: string, body?: object) => Promise<any>;
  /** Start the library's ledger worker on `queue` against `url`, its ledger in `ledger`. */
  start: (url: string, env: Record<string, string>) => WorkerProcess;
  /** Whether a request_retry event was for a connection lost or refused (not an HTTP status). */
  connectionRetry: (event: Record<string, any>) => boolean;
}

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

export function workerScenarios(s: WorkerScenarios): void {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'baton-worker-scenarios-'));
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  function worker(queue: string, env: Record<string, string> = {}, baseUrl = s.url()) {
    const name = `${queue}-${Math.random().toString(36).slice(2, 6)}`;
    const ledger = path.join(dir, `${name}.jsonl`);
    const process = s.start(baseUrl, { QUEUE: queue, WORKER_ID: name, LEDGER: ledger, ...env });
    return { ...process, name, ledger: () => readLedger(ledger) };
  }
  const named = (w: WorkerProcess, event: string) => w.events.filter((e) => e.event === event);
  const job = (id: string) => s.admin('GET', `/v1/jobs/${id}`);
  const enqueue = async (queue: string, payloads: unknown[]): Promise<string[]> =>
    (
      await s.admin('POST', `/v1/queues/${queue}/jobs/batch`, {
        jobs: payloads.map((payload) => ({ payload })),
      })
    ).jobs.map((j: { id: string }) => j.id);

  describe(`the ${s.library} worker process`, () => {
    it('on SIGTERM drains: short jobs finish and are acked, a long one is given back (ready at once, attempt uncounted) and another worker takes it long before its lease would have expired', async () => {
      const q = `${s.library.toLowerCase()}-sigterm`;
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
        proxy = await TcpProxy.start(s.url());
        proxied = `http://127.0.0.1:${proxy.port}`;
      });
      afterAll(async () => {
        await proxy?.close();
      });

      it('a lease lost while the worker could not reach Baton: the handler is told to stop, and this worker never acks the job that another now holds', async () => {
        const q = `${s.library.toLowerCase()}-lost`;
        const [id] = await enqueue(q, [{ block: true }]);
        const w = worker(q, { LEASE_MS: '2000' }, proxied);
        try {
          await until(() => w.ledger().some((l) => l.event === 'start'));
          await proxy.cut();
          // The lease runs out unrenewed; the leader re-arms the job, and another worker claims it.
          await until(async () => (await job(id!)).state === 'ready', 15_000);
          const claim = await s.admin('POST', `/v1/queues/${q}/claim`, { worker_id: 'the-other-worker' });
          expect(claim.jobs.map((j: { id: string }) => j.id)).toEqual([id]);
          await proxy.restore();
          await until(() => named(w, 'dropped').length === 1, 15_000);
          expect(w.ledger().map((l) => l.event)).toEqual(['start', 'lost']);
          expect(named(w, 'lease_lost')).toEqual([expect.objectContaining({ id, during: 'renew' })]);
          await s.admin('POST', `/v1/jobs/${id}/ack`, {
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
        const q = `${s.library.toLowerCase()}-drops`;
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
          expect(named(w, 'request_retry').some(s.connectionRetry)).toBe(true);
          w.child.kill('SIGTERM');
          expect(await w.exited).toBe(0);
        } finally {
          w.child.kill('SIGKILL');
          await proxy.restore();
        }
      }, 60_000);
    });
  });
}
