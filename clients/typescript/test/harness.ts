import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll } from 'vitest';
import type { BatonApp } from '../../../src/app.js';
import { createTestApp, listen } from '../../../test/support/app.js';
import { apiKeyEntry, secretOf } from '../../../test/support/keys.js';
import { startWorker, type WorkerProcess } from '../../../test/support/worker-process.js';
import type { LoggedEvent } from './in-process-worker.js';

/**
 * What the TypeScript library's tests share (the twin of clients/python/test/harness.ts): a real
 * Baton with API keys (admin, producer, consumer) and a leader re-arming expired leases every half
 * second, requests made by hand as the admin, and the library's worker run as a process.
 */

export const TS_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const SCRIPTS = path.join(TS_ROOT, 'test', 'scripts');

export const KEYS = {
  admin: secretOf('ts-admin'),
  producer: secretOf('ts-producer'),
  consumer: secretOf('ts-consumer'),
};

export const SERVER_ENV = {
  BATON_API_KEYS: JSON.stringify([
    apiKeyEntry('ts-admin', ['admin']),
    apiKeyEntry('ts-producer', ['producer']),
    apiKeyEntry('ts-consumer', ['consumer']),
  ]),
  // A leader re-arming expired leases every half second: a lease a worker failed to keep comes back.
  BATON_MAINTENANCE: 'true',
  BATON_TICK_MS: '500',
  BATON_DB_CONNECT_TIMEOUT_MS: '1000',
};

export const TRACEPARENT = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';

export async function startBaton(
  database: { url: string },
  env: Record<string, string> = {},
): Promise<{ app: BatonApp; url: string }> {
  const app = await createTestApp(database, { ...SERVER_ENV, ...env });
  return { app, url: await listen(app) };
}

/** One keyed Baton for the test file, listening on a loopback port (started in beforeAll). */
export function useBaton(database: { url: string }, env: Record<string, string> = {}) {
  let started: { app: BatonApp; url: string } | undefined;
  beforeAll(async () => {
    started = await startBaton(database, env);
  });
  afterAll(async () => {
    await started?.app.close();
  });
  const get = () => {
    if (!started) throw new Error('Baton used before beforeAll ran');
    return started;
  };
  return {
    get app() {
      return get().app;
    },
    get url() {
      return get().url;
    },
  };
}

/** A request as the admin, through the app; throws on an error answer. */
export async function admin(app: BatonApp, method: 'GET' | 'POST' | 'PUT', url: string, body?: object) {
  const res = await app.inject({
    method,
    url,
    headers: { authorization: `Bearer ${KEYS.admin}` },
    ...(body ? { payload: body } : {}),
  });
  if (res.statusCode >= 300) throw new Error(`${method} ${url}: ${res.statusCode} ${res.body}`);
  return res.json();
}

/**
 * Work the ready jobs of a queue by hand: claim up to 100 (waiting up to wait_ms for one) and ack
 * each with `result`. Answers the ids acked.
 */
export async function claimAndAck(app: BatonApp, queue: string, result: unknown = null, waitMs = 5000) {
  const claimed = await claim(app, queue, { max_jobs: 100, wait_ms: waitMs });
  for (const job of claimed) await ack(app, job, result);
  return claimed.map((job) => job.id);
}

export interface HandClaimed {
  id: string;
  lease_token: string;
  attempt: number;
  payload: unknown;
}

/** A claim made by hand, as the admin. */
export async function claim(app: BatonApp, queue: string, body: object = {}): Promise<HandClaimed[]> {
  return (await admin(app, 'POST', `/v1/queues/${encodeURIComponent(queue)}/claim`, body)).jobs;
}

export async function ack(app: BatonApp, job: HandClaimed, result: unknown = null) {
  return admin(app, 'POST', `/v1/jobs/${job.id}/ack`, { lease_token: job.lease_token, result });
}

/** A logger hook that keeps the library's events, for assertions on what it said. */
export function eventLog() {
  const events: LoggedEvent[] = [];
  return {
    events,
    logger: (level: string, event: string, fields: Record<string, unknown>) => {
      events.push({ level, event, ...fields });
    },
    named: (event: string) => events.filter((e) => e.event === event),
  };
}

/** The environment a worker process gets: where Baton is, and the consumer key. */
export function workerEnv(url: string, env: Record<string, string> = {}): Record<string, string> {
  return { BATON_URL: url, BATON_API_KEY: KEYS.consumer, ...env };
}

/**
 * A script of test/scripts run as a Node process (this Node, with tsx for the TypeScript), its
 * JSON-line events on stdout parsed.
 */
export function startScript(script: string, env: Record<string, string>): WorkerProcess {
  return startWorker(process.execPath, ['--import', 'tsx', path.join(SCRIPTS, script)], env);
}

/** One line of a ledger-worker.ts ledger: a handler's start, end, or end after its signal aborted. */
export interface LedgerLine {
  event: 'start' | 'end' | 'lost';
  id: string;
  attempt: number;
  worker: string;
  pid: number;
  lease_expires_at?: string;
  reason?: string;
}

export const readLedger = (file: string): LedgerLine[] =>
  fs.existsSync(file)
    ? fs
        .readFileSync(file, 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((line) => JSON.parse(line))
    : [];

/**
 * A TCP proxy in front of Baton that forwards each request but, for the next `drop` connections
 * that get an answer, drops the connection instead of passing the answer on: Baton did the work,
 * the client never learns it.
 */
export class AnswerDropper {
  /** How many answers still to drop. */
  drop = 0;
  /** Answers dropped so far. */
  dropped = 0;
  private readonly sockets = new Set<net.Socket>();
  private constructor(
    private readonly server: net.Server,
    readonly url: string,
  ) {}

  static async start(target: string): Promise<AnswerDropper> {
    const { hostname, port } = new URL(target);
    let dropper: AnswerDropper | undefined;
    const server = net.createServer((client) => {
      const upstream = net.connect(Number(port), hostname);
      for (const s of [client, upstream]) {
        dropper!.sockets.add(s);
        s.on('close', () => dropper!.sockets.delete(s));
        s.on('error', () => {
          client.destroy();
          upstream.destroy();
        });
      }
      client.pipe(upstream);
      upstream.on('data', (chunk: Buffer) => {
        if (dropper!.drop > 0) {
          dropper!.drop--;
          dropper!.dropped++;
          client.destroy();
          upstream.destroy();
        } else client.write(chunk);
      });
      upstream.on('end', () => client.end());
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const address = server.address() as net.AddressInfo;
    dropper = new AnswerDropper(server, `http://127.0.0.1:${address.port}`);
    return dropper;
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
