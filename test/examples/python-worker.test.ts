import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BatonApp } from '../../src/app.js';
import { sha256 } from '../../src/auth/api-keys.js';
import { createTestApp, listen } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { TcpProxy } from '../support/tcp-proxy.js';
import { until } from '../support/until.js';
import { startWorker, type WorkerProcess } from '../support/worker-process.js';

/**
 * examples/worker.py (standard library only) against a real server with API keys on and a leader
 * re-arming expired leases every half second: so a lease the worker failed to renew, or a job it
 * lost track of, would come back and be worked twice, and the ledgers would show it.
 */
const database = useTestDatabase();
const ADMIN = 'py-admin-key';
const CONSUMER = 'py-consumer-key';
const KEYS = JSON.stringify([
  { name: 'admin', sha256: sha256(ADMIN).toString('hex'), scopes: ['admin'] },
  { name: 'worker', sha256: sha256(CONSUMER).toString('hex'), scopes: ['consumer'] },
]);
const SERVER_ENV = {
  BATON_API_KEYS: KEYS,
  BATON_MAINTENANCE: 'true',
  BATON_TICK_MS: '500',
  BATON_DB_CONNECT_TIMEOUT_MS: '1000',
};
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'baton-py-'));

interface Job {
  id: string;
  state: string;
  attempts: number;
  payload: any;
  result: any;
  dead_reason: string | null;
  last_error: { message: string; details?: any } | null;
}

let app: BatonApp;
let url: string;
beforeAll(async () => {
  app = await createTestApp(database, SERVER_ENV);
  url = await listen(app);
});
afterAll(async () => {
  await app?.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

/** A request as the admin, through the app. */
async function admin(method: 'GET' | 'POST' | 'PUT', url: string, body?: object) {
  const res = await app.inject({
    method,
    url,
    headers: { authorization: `Bearer ${ADMIN}` },
    ...(body ? { payload: body } : {}),
  });
  if (res.statusCode >= 300) throw new Error(`${method} ${url}: ${res.statusCode} ${res.body}`);
  return res.json();
}

async function enqueue(queue: string, payloads: object[]): Promise<string[]> {
  const jobs = payloads.map((payload) => ({ payload }));
  return (await admin('POST', `/v1/queues/${queue}/jobs/batch`, { jobs })).jobs.map((j: Job) => j.id);
}

/** Every job of the queue in a finished state, with payloads. */
async function finished(queue: string): Promise<Job[]> {
  const list = async (state: string) =>
    (await admin('GET', `/v1/queues/${queue}/jobs?state=${state}&limit=500&include_payload=true`)).jobs;
  return [...(await list('completed')), ...(await list('dead'))];
}

function python(queue: string, env: Record<string, string> = {}): WorkerProcess & { ledger: string } {
  const ledger = path.join(dir, `${queue}-${Math.random().toString(36).slice(2)}.jsonl`);
  const worker = startWorker('python3', ['examples/worker.py'], {
    BATON_URL: url,
    BATON_API_KEY: CONSUMER,
    QUEUE: queue,
    WAIT_MS: '1000',
    HANDLER: 'test/examples/ledger_handler.py:handle',
    LEDGER: ledger,
    WORKER_ID: `py-${queue}-${Math.random().toString(36).slice(2, 6)}`,
    ...env,
  });
  return { ...worker, ledger };
}

/** How many times the handler ran, per job id, over the given ledgers. */
function runs(...ledgers: string[]): Map<string, number> {
  const count = new Map<string, number>();
  for (const file of ledgers) {
    if (!fs.existsSync(file)) continue;
    for (const line of fs.readFileSync(file, 'utf8').split('\n').filter(Boolean)) {
      const { id } = JSON.parse(line);
      count.set(id, (count.get(id) ?? 0) + 1);
    }
  }
  return count;
}

const idsOf = (events: Record<string, any>[], event: string) =>
  events.filter((e) => e.event === event).map((e) => e.id as string);

const tally = (ids: string[]) => {
  const count = new Map<string, number>();
  for (const id of ids) count.set(id, (count.get(id) ?? 0) + 1);
  return count;
};

async function stop(worker: WorkerProcess) {
  worker.child.kill('SIGTERM');
  expect(await worker.exited).toBe(0);
  expect(worker.events.at(-1)).toMatchObject({ event: 'drained' });
  expect(worker.events.filter((e) => e.event === 'not_json')).toEqual([]);
}

describe('examples/worker.py', () => {
  it('works a few hundred jobs side by side, each exactly once: completed, or dead after its attempts', async () => {
    const q = 'py-many';
    await admin('PUT', `/v1/queues/${q}`, {
      max_attempts: 3,
      backoff: { base_ms: 0, max_ms: 0, jitter: false },
    });
    const kinds = [
      ...Array.from({ length: 240 }, (_, n) => ({ n, sleep_ms: n % 20 })),
      ...Array.from({ length: 30 }, (_, n) => ({ n, fail_until_attempt: 2 })),
      ...Array.from({ length: 30 }, (_, n) => ({ n, fail: `broken ${n}` })),
      // 2.5 s of work under a 1.5 s lease: completes in one attempt only if the worker renews.
      ...Array.from({ length: 3 }, (_, n) => ({ n, sleep_ms: 2500 })),
    ];
    const ids = await enqueue(q, kinds);
    const worker = python(q, { CONCURRENCY: '8', LEASE_MS: '1500' });
    try {
      await until(async () => (await finished(q)).length === ids.length, 60_000);
      // The worker hears of its last acks after the server has them: its events are read once it has exited.
      await stop(worker);
      const jobs = new Map((await finished(q)).map((job) => [job.id, job]));
      const handled = runs(worker.ledger);
      const acked = tally(idsOf(worker.events, 'acked'));
      const nacked = tally(idsOf(worker.events, 'nacked'));
      for (const [i, id] of ids.entries()) {
        const job = jobs.get(id)!;
        const kind = kinds[i]!;
        const attempts = 'fail' in kind ? 3 : 'fail_until_attempt' in kind ? 2 : 1;
        const where = `job ${id} ${JSON.stringify(kind)}`;
        expect(job.attempts, where).toBe(attempts);
        expect(handled.get(id), where).toBe(attempts);
        expect(nacked.get(id) ?? 0, where).toBe('fail' in kind ? 3 : attempts - 1);
        if ('fail' in kind) {
          expect(job, where).toMatchObject({ state: 'dead', dead_reason: 'attempts_exhausted' });
          expect(job.last_error?.message).toBe(kind.fail);
          expect(acked.has(id), where).toBe(false);
        } else {
          expect(job, where).toMatchObject({ state: 'completed', result: { attempt: attempts } });
          expect(acked.get(id), where).toBe(1);
        }
      }
      // Side by side: the first claim took a full pool's worth.
      expect(Math.max(...worker.events.filter((e) => e.event === 'claimed').map((e) => e.in_flight))).toBe(8);
      // Ack-and-claim: most jobs came with the ack of the job before them, not from a claim.
      const claimedBy = tally(worker.events.filter((e) => e.event === 'claimed').map((e) => e.by));
      expect(claimedBy.get('ack') ?? 0).toBeGreaterThan(claimedBy.get('claim') ?? 0);
      expect(
        worker.events.filter((e) => ['lease_lost', 'dropped', 'worker_error'].includes(e.event)),
      ).toEqual([]);
    } finally {
      worker.child.kill('SIGKILL');
    }
  }, 90_000);

  it('on SIGTERM stops claiming, finishes and acks what it holds, exits 0; another worker does the rest, nothing twice', async () => {
    const q = 'py-drain';
    const ids = await enqueue(
      q,
      Array.from({ length: 40 }, (_, n) => ({ n, sleep_ms: 300 })),
    );
    const first = python(q, { CONCURRENCY: '4', LEASE_MS: '5000' });
    let second: ReturnType<typeof python> | undefined;
    try {
      await until(() => idsOf(first.events, 'acked').length >= 8);
      first.child.kill('SIGTERM');
      expect(await first.exited).toBe(0);
      const claimed = idsOf(first.events, 'claimed');
      expect(claimed.length).toBeLessThan(ids.length);
      // Everything it held was finished and acked before it went.
      expect(new Set(idsOf(first.events, 'acked'))).toEqual(new Set(claimed));
      expect(first.events.map((e) => e.event)).toContain('stopping');
      expect(first.events.at(-1)).toMatchObject({ event: 'drained' });
      expect(first.events.filter((e) => e.event === 'not_json')).toEqual([]);

      second = python(q, { CONCURRENCY: '4', LEASE_MS: '5000' });
      await until(async () => (await finished(q)).length === ids.length, 30_000);
      expect((await finished(q)).every((job) => job.state === 'completed')).toBe(true);
      const handled = runs(first.ledger, second.ledger);
      expect(ids.map((id) => handled.get(id))).toEqual(ids.map(() => 1));
      // The server records an ack before the worker hears of it and writes its event, so the second
      // worker's events are read once it has exited.
      await stop(second);
      expect(new Set([...claimed, ...idsOf(second.events, 'acked')])).toEqual(new Set(ids));
    } finally {
      first.child.kill('SIGKILL');
      second?.child.kill('SIGKILL');
    }
  }, 60_000);

  it('drops a job whose lease is lost (409 lease_lost) without acking or nacking it', async () => {
    const q = 'py-lost';
    const [id] = await enqueue(q, [{ sleep_ms: 10_000 }]);
    const worker = python(q, { LEASE_MS: '1500' });
    try {
      await until(() => idsOf(worker.events, 'claimed').includes(id!));
      await admin('POST', `/v1/jobs/${id}/cancel`);
      await until(() => idsOf(worker.events, 'dropped').includes(id!));
      expect(worker.events.filter((e) => e.id === id).map((e) => [e.event, e.during])).toEqual([
        ['claimed', undefined],
        ['lease_lost', 'renew'],
        ['dropped', undefined],
      ]);
      expect((await admin('GET', `/v1/jobs/${id}`)).state).toBe('cancelled');
      await stop(worker);
    } finally {
      worker.child.kill('SIGKILL');
    }
  }, 30_000);

  it('sends what the handler reports (job.report) with a renewal brought forward, long before a third of the lease', async () => {
    const q = 'py-progress';
    const [id] = await enqueue(q, [{ steps: 3, sleep_ms: 4500 }]);
    // A 30 s lease is renewed after 10 s; the first report (after 1.5 s) goes out within a second.
    const worker = python(q, { LEASE_MS: '30000' });
    try {
      await until(() => idsOf(worker.events, 'claimed').includes(id!));
      const claimedAt = Date.now();
      await until(async () => {
        const job = await admin('GET', `/v1/jobs/${id}`);
        return job.state === 'claimed' && job.progress?.done >= 1;
      }, 8000);
      expect(Date.now() - claimedAt).toBeLessThan(6000);
      await until(async () => (await admin('GET', `/v1/jobs/${id}`)).state === 'completed');
      // The last report may not have gone out before the ack: the job keeps the latest one sent.
      expect((await admin('GET', `/v1/jobs/${id}`)).progress).toMatchObject({ of: 3 });
      await stop(worker);
    } finally {
      worker.child.kill('SIGKILL');
    }
  }, 30_000);

  it('runs a shell command as the handler, as worker.sh does (examples/send-mail.sh)', async () => {
    const q = 'py-sh';
    const [good, bad] = await enqueue(q, [{ to: 'ada@example.com' }, { subject: 'no address' }]);
    const worker = python(q, { HANDLER: '', HANDLER_COMMAND: 'examples/send-mail.sh' });
    try {
      await until(async () => {
        const [g, b] = await Promise.all([good, bad].map((id) => admin('GET', `/v1/jobs/${id}`)));
        return g.state === 'completed' && b.state === 'scheduled';
      });
      expect((await admin('GET', `/v1/jobs/${good}`)).result).toEqual({ sent_to: 'ada@example.com' });
      expect((await admin('GET', `/v1/jobs/${bad}`)).last_error).toMatchObject({
        message: 'payload has no "to" address\n',
        details: { exit_status: 2 },
      });
      await stop(worker);
    } finally {
      worker.child.kill('SIGKILL');
    }
  }, 30_000);

  it('runs the shipped handler the README names (examples/send_mail.py:send_mail)', async () => {
    const q = 'py-mail';
    const [good, bad] = await enqueue(q, [{ to: 'ada@example.com' }, { subject: 'no address' }]);
    const worker = python(q, { HANDLER: 'examples/send_mail.py:send_mail' });
    try {
      await until(async () => {
        const [g, b] = await Promise.all([good, bad].map((id) => admin('GET', `/v1/jobs/${id}`)));
        return g.state === 'completed' && b.state === 'dead';
      });
      expect((await admin('GET', `/v1/jobs/${good}`)).result).toEqual({ sent_to: 'ada@example.com' });
      expect(await admin('GET', `/v1/jobs/${bad}`)).toMatchObject({
        dead_reason: 'nacked_dead',
        last_error: { message: 'payload has no "to" address' },
      });
      await stop(worker);
    } finally {
      worker.child.kill('SIGKILL');
    }
  }, 30_000);
});

describe('examples/worker.py through outages', () => {
  let outageApp: BatonApp;
  let databaseProxy: TcpProxy;
  let serverProxy: TcpProxy;
  beforeAll(async () => {
    databaseProxy = await TcpProxy.start(database.url);
    outageApp = await createTestApp({ url: databaseProxy.urlFor(database.url) }, SERVER_ENV);
    serverProxy = await TcpProxy.start(await listen(outageApp));
  });
  afterAll(async () => {
    await outageApp?.close();
    await databaseProxy?.close();
    await serverProxy?.close();
  });

  it('rides out a burst of 503s (after Retry-After) and a server it cannot reach, acking each job once', async () => {
    const q = 'py-outage';
    const ids = await enqueue(
      q,
      Array.from({ length: 60 }, (_, n) => ({ n, sleep_ms: 100 })),
    );
    const worker = python(q, {
      BATON_URL: `http://127.0.0.1:${serverProxy.port}`,
      CONCURRENCY: '4',
      LEASE_MS: '10000',
    });
    const retries = (reason: RegExp) =>
      worker.events.filter((e) => e.event === 'request_retry' && reason.test(e.reason));
    try {
      await until(() => idsOf(worker.events, 'acked').length >= 10);
      // The database goes away: the server answers 503 with Retry-After: 1, and the worker waits that long.
      await databaseProxy.cut();
      await until(() => retries(/^http 503$/).length >= 2);
      expect(retries(/^http 503$/)[0]).toMatchObject({ wait_s: 1 });
      await databaseProxy.restore();
      // Then the server itself cannot be reached: connection refused.
      await until(() => idsOf(worker.events, 'acked').length >= 20);
      await serverProxy.cut();
      await until(() => retries(/Error/).length >= 2);
      await serverProxy.restore();

      await until(async () => (await finished(q)).length === ids.length, 45_000);
      expect((await finished(q)).every((job) => job.state === 'completed')).toBe(true);
      expect(worker.child.exitCode).toBe(null);
      // Each job acked once by the worker; one whose lease was lost in the outage was dropped, not acked.
      const acked = tally(idsOf(worker.events, 'acked'));
      expect([...acked.values()].every((n) => n === 1)).toBe(true);
      expect(runs(worker.ledger).size).toBe(ids.length);
      await stop(worker);
    } finally {
      worker.child.kill('SIGKILL');
    }
  }, 90_000);
});
