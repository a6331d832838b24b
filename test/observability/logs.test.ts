import { Writable } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { type BatonApp, buildApp } from '../../src/app.js';
import { createLogger } from '../../src/logger.js';
import { testConfig } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { api } from '../support/http.js';

const database = useTestDatabase();

/** A log destination that keeps every line written to it. */
function capture() {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk, _encoding, done) {
      lines.push(...String(chunk).split('\n').filter(Boolean));
      done();
    },
  });
  return { lines, stream, json: () => lines.map((l) => JSON.parse(l) as Record<string, any>) };
}

let app: BatonApp | undefined;
afterEach(async () => {
  await app?.close();
  app = undefined;
});

/** One job's life (enqueue, claim, renew, ack) plus a probe, logged at `level`. */
async function lifeOfAJob(level: 'info' | 'debug') {
  const out = capture();
  const config = testConfig({ LOG_LEVEL: level, LOG_FORMAT: 'json' });
  app = await buildApp({ config, databaseUrl: database.url, logger: createLogger(config, out.stream) });
  const { id } = (await api(app).enqueue('logs', { payload: {} })).body;
  const token = (await api(app).claim('logs')).body.jobs[0].lease_token;
  await api(app).renew(id, { lease_token: token });
  await api(app).ack(id, { lease_token: token });
  await app.inject({ method: 'GET', url: '/healthz' });
  return out.json().filter((l) => l.req || l.res);
}

describe('request logs', () => {
  it('at the default level (info) a request writes no log line', async () => {
    expect(await lifeOfAJob('info')).toEqual([]);
  });

  it('at debug each request writes one line, after it completes: method, url, status, duration, request id', async () => {
    const lines = await lifeOfAJob('debug');
    expect(lines.map((l) => `${l.req.method} ${l.req.url} ${l.res.statusCode}`)).toEqual([
      'POST /v1/queues/logs/jobs 201',
      'POST /v1/queues/logs/claim 200',
      expect.stringMatching(/^POST \/v1\/jobs\/\d+\/renew 200$/),
      expect.stringMatching(/^POST \/v1\/jobs\/\d+\/ack 200$/),
    ]);
    for (const line of lines) {
      expect(line).toMatchObject({ level: 20, msg: 'request completed', request_id: expect.any(String) });
      expect(line.responseTime).toEqual(expect.any(Number));
    }
  });
});

describe('log format', () => {
  it('an error is logged with its plain fields and stack, never the objects a library hangs on it', () => {
    const out = capture();
    const log = createLogger({ logLevel: 'info', logFormat: 'json' }, out.stream);
    // node-postgres puts the whole client (its configuration, connection, queues) on a connection error.
    const err = Object.assign(new Error('terminating connection due to administrator command'), {
      code: '57P01',
      client: {
        connectionParameters: { password: 'hunter2', host: 'db' },
        queryQueue: new Array(50).fill({}),
      },
    });
    log.warn({ err }, 'LISTEN connection lost; reconnecting');
    const [line] = out.json();
    expect(line!.err).toMatchObject({ type: 'Error', code: '57P01', message: err.message });
    expect(line!.err.stack).toContain('terminating connection');
    expect(line!.err.client).toBeUndefined();
    expect(out.lines[0]).not.toContain('hunter2');
  });

  it('pretty: one readable line per event, still without lease tokens', () => {
    const out = capture();
    const log = createLogger({ logLevel: 'info', logFormat: 'pretty' }, out.stream);
    log.info({ queue: 'emails', lease_token: 'tok-secret' }, 'claimed');
    expect(out.lines).toHaveLength(1);
    expect(() => JSON.parse(out.lines[0]!)).toThrow();
    expect(out.lines[0]).toMatch(/^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: claimed \{.*"queue":"emails".*\}$/);
    expect(out.lines[0]).not.toContain('tok-secret');
  });

  it('pretty: a request line reads as method, url, status and duration', () => {
    const out = capture();
    const log = createLogger({ logLevel: 'debug', logFormat: 'pretty' }, out.stream);
    log.debug(
      { req: { method: 'POST', url: '/v1/jobs/7/ack' }, res: { statusCode: 200 }, responseTime: 2.4 },
      'request completed',
    );
    expect(out.lines[0]).toMatch(/ DEBUG: request completed: POST \/v1\/jobs\/7\/ack 200 in 2\.4 ms /);
  });

  it('auto: JSON when the destination is not a terminal', () => {
    const out = capture();
    createLogger({ logLevel: 'info', logFormat: 'auto' }, out.stream).info({ n: 1 }, 'hello');
    expect(out.json()).toEqual([
      expect.objectContaining({ level: 30, service: 'baton', n: 1, msg: 'hello' }),
    ]);
  });
});
