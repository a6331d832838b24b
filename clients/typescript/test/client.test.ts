import net from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { useTestDatabase } from '../../../test/support/database.js';
import { BatonError, Client } from '../src/index.js';
import { claimAndAck, eventLog, KEYS, TRACEPARENT, useBaton } from './harness.js';

/**
 * The client against a real Baton with API keys: every enqueue option, batches with dependency
 * graphs, reads, awaits, cancel, parents and children, any other endpoint, errors, retries of what
 * certainly did not reach Baton, trace context.
 */
const database = useTestDatabase();
const baton = useBaton(database);
const clients: Client[] = [];
const client = (apiKey: string | undefined, extra: ConstructorParameters<typeof Client>[0] = {}) => {
  const made = new Client({ url: baton.url, apiKey, ...extra });
  clients.push(made);
  return made;
};
afterAll(() => {
  for (const made of clients) made.close();
});
const producer = () => client(KEYS.producer);
const admin = () => client(KEYS.admin);

describe('enqueue', () => {
  it('every option reaches the job', async () => {
    const runAt = new Date(Date.now() + 3_600_000).toISOString();
    const job = await producer().enqueue(
      'ts-opts',
      { to: 'ada@example.com' },
      {
        group: 'customer:42',
        priority: 7,
        run_at: runAt,
        max_attempts: 4,
        timeout_ms: 5000,
        expires_in_ms: 7_200_000,
        idempotency_key: 'k-1',
        unique_key: 'u-1',
        traceparent: TRACEPARENT,
        tracestate: 'vendor=1',
      },
    );
    expect(job.state).toBe('scheduled');
    const read = await producer().get(job.id);
    expect(read).toMatchObject({
      payload: { to: 'ada@example.com' },
      group: 'customer:42',
      priority: 7,
      max_attempts: 4,
      timeout_ms: 5000,
      idempotency_key: 'k-1',
      unique_key: 'u-1',
      traceparent: TRACEPARENT,
      tracestate: 'vendor=1',
    });
    expect(Date.parse(read.run_at)).toBe(Date.parse(runAt));
    expect(Date.parse(read.expires_at!) - Date.now()).toBeGreaterThan(7_000_000);

    const delayed = await producer().enqueue('ts-opts', null, { delay_ms: 60_000, expires_at: runAt });
    expect(delayed.state).toBe('scheduled');
    expect(Date.parse(delayed.run_at) - Date.now()).toBeGreaterThan(55_000);
    expect(Date.parse((await producer().get(delayed.id)).expires_at!)).toBe(Date.parse(runAt));
  });

  it('an idempotency key answers the original job; a unique key with on_conflict replace debounces', async () => {
    const first = await producer().enqueue('ts-idem', { n: 1 }, { idempotency_key: 'same' });
    const second = await producer().enqueue('ts-idem', { n: 2 }, { idempotency_key: 'same' });
    expect(second.id).toBe(first.id);
    expect((await producer().get(first.id)).payload).toEqual({ n: 1 });

    const held = await producer().enqueue('ts-unique', { v: 1 }, { unique_key: 'digest', delay_ms: 60_000 });
    const replaced = await producer().enqueue(
      'ts-unique',
      { v: 2 },
      { unique_key: 'digest', on_conflict: 'replace', delay_ms: 60_000 },
    );
    expect(replaced.id).toBe(held.id);
    expect((await producer().get(held.id)).payload).toEqual({ v: 2 });
  });

  it('a batch enqueues a graph (by item and by id), and parents gate their children', async () => {
    const existing = await producer().enqueue('ts-graph', { step: 'existing' });
    const jobs = await producer().enqueueBatch('ts-graph', [
      { payload: { step: 'fetch' } },
      { payload: { step: 'resize' }, depends_on: [{ item: 0 }] },
      { payload: { step: 'publish' }, depends_on: [{ item: 0 }, { item: 1 }, existing.id] },
    ]);
    const [fetch, resize, publish] = jobs.map((job) => job.id);
    expect(jobs.map((job) => [job.created, job.state])).toEqual([
      [true, 'ready'],
      [true, 'waiting'],
      [true, 'waiting'],
    ]);
    const ids = (list: { jobs: { id: string }[] }) => list.jobs.map((j) => j.id).sort();
    expect(ids(await producer().parents(publish!))).toEqual([fetch, resize, existing.id].sort());
    expect(ids(await producer().children(fetch!))).toEqual([resize, publish].sort());
    const page = await producer().parents(publish!, { limit: 2 });
    expect(page.jobs).toHaveLength(2);
    expect(ids(await producer().parents(publish!, { cursor: page.next_cursor! }))).toHaveLength(1);

    // Work the queue by hand: only what has its parents done is ever ready.
    const first = await claimAndAck(baton.app, 'ts-graph', { ok: 1 });
    if (first.length < 2) first.push(...(await claimAndAck(baton.app, 'ts-graph', { ok: 1 })));
    expect(first.sort()).toEqual([existing.id, fetch].sort());
    expect(await claimAndAck(baton.app, 'ts-graph', { ok: 2 })).toEqual([resize]);
    expect(await claimAndAck(baton.app, 'ts-graph', { ok: 3 })).toEqual([publish]);
    const parents = (await producer().parents(publish!)).jobs;
    expect(parents.find((p) => p.id === resize)).toMatchObject({
      result: { ok: 2 },
      parent_outcome: 'completed',
    });
  });

  it('on_parent_failure decides what a failed parent does to its child', async () => {
    const [parent, child] = await producer().enqueueBatch('ts-parent-fails', [
      { payload: 'parent', max_attempts: 1 },
      { payload: 'child', depends_on: [{ item: 0 }], on_parent_failure: 'run' },
    ]);
    await admin().cancel(parent!.id);
    const released = await producer()
      .await(child!.id, { timeoutMs: 1000 })
      .catch((err: BatonError) => err);
    // Still live (it runs, rather than dying with its parent): the await times out.
    expect(released).toMatchObject({ code: 'await_timeout' });
    expect((await producer().get(child!.id)).state).toBe('ready');
  });

  it('refuses a batch of more than 1,000 jobs before sending it', async () => {
    await expect(
      producer().enqueueBatch(
        'ts-big',
        Array.from({ length: 1001 }, (_, n) => ({ payload: n })),
      ),
    ).rejects.toThrow(RangeError);
  });
});

describe('reads and awaits', () => {
  it('await answers the finished job, and rejects with await_timeout while it is live', async () => {
    const job = await producer().enqueue('ts-await', { n: 1 });
    const early = await producer()
      .await(job.id, { timeoutMs: 300 })
      .catch((err: unknown) => err);
    expect(early).toBeInstanceOf(BatonError);
    expect(early).toMatchObject({ status: 0, code: 'await_timeout' });
    setTimeout(() => void claimAndAck(baton.app, 'ts-await', { done: true }), 300);
    expect(await producer().await(job.id, { timeoutMs: 30_000 })).toMatchObject({
      state: 'completed',
      result: { done: true },
    });
  });

  it('awaitMany answers every job in the order given, and names the ids of no job', async () => {
    const ids = (
      await producer().enqueueBatch(
        'ts-await-many',
        [0, 1, 2, 3, 4].map((n) => ({ payload: n })),
      )
    ).map((j) => j.id);
    setTimeout(() => void claimAndAck(baton.app, 'ts-await-many', 'ok'), 300);
    const jobs = await producer().awaitMany([...ids].reverse(), { timeoutMs: 30_000 });
    expect(jobs.map((j) => j.id)).toEqual([...ids].reverse());
    expect(jobs.every((j) => j.state === 'completed' && j.result === 'ok')).toBe(true);
    await expect(producer().awaitMany([ids[0]!, '999999999'], { timeoutMs: 1000 })).rejects.toMatchObject({
      status: 404,
      code: 'not_found',
      detail: expect.stringContaining('999999999'),
    });
  });

  it('cancel ends a live job (admin only), again is the same answer, and a completed job is 409 invalid_state', async () => {
    const job = await producer().enqueue('ts-cancel', null);
    await expect(producer().cancel(job.id)).rejects.toMatchObject({ status: 403, code: 'forbidden' });
    expect((await admin().cancel(job.id)).state).toBe('cancelled');
    expect((await producer().await(job.id, { timeoutMs: 5000 })).state).toBe('cancelled');
    expect((await admin().cancel(job.id)).state).toBe('cancelled');
    const done = await producer().enqueue('ts-cancel', null);
    await claimAndAck(baton.app, 'ts-cancel');
    await expect(admin().cancel(done.id)).rejects.toMatchObject({ status: 409, code: 'invalid_state' });
  });

  it('request reaches any other endpoint with the same key and errors', async () => {
    await admin().request('PUT', '/v1/queues/ts-request', { body: { max_attempts: 9 } });
    expect(await admin().request('GET', '/v1/queues/ts-request')).toMatchObject({
      name: 'ts-request',
      max_attempts: 9,
    });
    await expect(
      producer().request('PUT', '/v1/queues/ts-request', { body: { max_attempts: 2 } }),
    ).rejects.toMatchObject({
      status: 403,
    });
  });
});

describe('errors and retries', () => {
  it('a refusal is a BatonError with status, code, detail and the fields at fault', async () => {
    const error = await producer()
      .enqueueBatch('ts-bad', [{ payload: 1 }, { payload: 2, priority: 2 ** 40 }])
      .catch((err: unknown) => err);
    expect(error).toBeInstanceOf(BatonError);
    const refused = error as BatonError;
    expect([refused.status, refused.code]).toEqual([400, 'validation_failed']);
    expect(refused.errors.map((e) => e.field)).toEqual(['jobs[1].priority']);
    expect(refused.detail).toContain('jobs[1].priority');
    expect(refused.message).toMatch(/^400 validation_failed: /);
    await expect(producer().get('999999999')).rejects.toMatchObject({ status: 404, code: 'not_found' });
    await expect(client('not-a-key').get('1')).rejects.toMatchObject({ status: 401, code: 'unauthorized' });
  });

  it('an enqueue whose connection was refused is retried, and lands once the server answers', async () => {
    // A port nothing listens on yet: a proxy to Baton opens on it after two refusals.
    const port = await freePort();
    const log = eventLog();
    const late = new Client({ url: `http://127.0.0.1:${port}`, apiKey: KEYS.producer, logger: log.logger });
    clients.push(late);
    let proxy: net.Server | undefined;
    const opened = new Promise<void>((resolve) => {
      const check = setInterval(() => {
        if (log.named('request_retry').length < 2) return;
        clearInterval(check);
        proxy = net.createServer((socket) => {
          const upstream = net.connect(Number(new URL(baton.url).port), '127.0.0.1');
          socket.pipe(upstream).pipe(socket);
          socket.on('error', () => upstream.destroy());
          upstream.on('error', () => socket.destroy());
        });
        proxy.listen(port, '127.0.0.1', () => resolve());
      }, 5);
    });
    try {
      const job = await late.enqueue('ts-late', { n: 1 });
      await opened;
      expect(job.state).toBe('ready');
      expect(log.named('request_retry').every((e) => e.code === 'connection_failed')).toBe(true);
      late.close();
    } finally {
      await new Promise((resolve) => (proxy ? proxy.close(resolve) : resolve(undefined)));
    }
  });

  it('an enqueue without an idempotency key is not retried once it may have reached Baton; one with a key is', async () => {
    // A server that takes the request and drops the connection without an answer.
    const silent = net.createServer((socket) => socket.once('data', () => socket.destroy()));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const log = eventLog();
    const dropped = new Client({
      url: `http://127.0.0.1:${(silent.address() as net.AddressInfo).port}`,
      logger: log.logger,
      maxRetries: 2,
    });
    try {
      await expect(dropped.enqueue('q', 1)).rejects.toMatchObject({ status: 0, code: 'connection_failed' });
      expect(log.named('request_retry')).toEqual([]);
      await expect(dropped.enqueue('q', 1, { idempotency_key: 'k' })).rejects.toMatchObject({
        code: 'connection_failed',
      });
      expect(log.named('request_retry')).toHaveLength(2);
    } finally {
      dropped.close();
      await new Promise((resolve) => silent.close(resolve));
    }
  });
});

describe('trace context', () => {
  it('the hook gives its context to jobs enqueued without their own', async () => {
    const hooked = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
    const traced = client(KEYS.producer, {
      traceContext: () => ({ traceparent: hooked, tracestate: 'a=1' }),
    });
    const plain = await traced.enqueue('ts-trace', null);
    const own = await traced.enqueue('ts-trace', null, { traceparent: TRACEPARENT });
    const batch = await traced.enqueueBatch('ts-trace', [
      { payload: 1 },
      { payload: 2, traceparent: TRACEPARENT },
    ]);
    expect(await traced.get(plain.id)).toMatchObject({ traceparent: hooked, tracestate: 'a=1' });
    expect((await traced.get(own.id)).traceparent).toBe(TRACEPARENT);
    const batchTraces = await Promise.all(batch.map(async (j) => (await traced.get(j.id)).traceparent));
    expect(batchTraces).toEqual([hooked, TRACEPARENT]);
  });
});

/** A loopback port free now (listened on, then closed). */
async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}
