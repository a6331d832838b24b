import net from 'node:net';
import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { buildApp } from '../../src/app.js';
import { testConfig, useListeningApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';

/**
 * The edges of HTTP: every answer is problem+json with a `code`, slow or huge requests cost their
 * sender and nobody else, and nothing reaches a handler that it could not handle.
 */
const database = useTestDatabase();
const server = useListeningApp(database, { BATON_REQUEST_TIMEOUT_MS: '1000' });
const app = server.app;

/** Send raw bytes on a fresh connection; resolves with everything the server wrote before closing. */
function rawRequest(
  text: string,
  opts: { holdOpenMs?: number } = {},
): Promise<{ answer: string; closedAfterMs: number }> {
  const { port } = new URL(server.url);
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), '127.0.0.1', () => socket.write(text));
    let answer = '';
    socket.on('data', (c) => {
      answer += c;
    });
    socket.on('close', () => resolve({ answer, closedAfterMs: Date.now() - started }));
    socket.on('error', reject);
    if (opts.holdOpenMs) setTimeout(() => socket.destroy(), opts.holdOpenMs);
  });
}

function expectProblem(
  res: { statusCode: number; headers: Record<string, unknown>; body: string },
  status: number,
  code: string,
) {
  expect(res.statusCode, res.body).toBe(status);
  expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
  expect(JSON.parse(res.body)).toMatchObject({ status, code });
}

describe('every error is problem+json with a code', () => {
  it('a path segment longer than the router allows: 414 uri_too_long', async () => {
    const res = await app.inject({ method: 'GET', url: `/v1/queues/${'q'.repeat(300)}` });
    expectProblem(res, 414, 'uri_too_long');
  });

  it('a URL that cannot be decoded: 400 bad_request', async () => {
    expectProblem(await app.inject({ method: 'GET', url: '/v1/queues/a%zz' }), 400, 'bad_request');
  });

  it('a known path with another method: 405 with Allow', async () => {
    for (const method of ['PATCH', 'OPTIONS', 'DELETE'] as const) {
      const res = await app.inject({ method, url: '/v1/queues/emails/jobs' });
      expectProblem(res, 405, 'method_not_allowed');
      expect(res.headers.allow).toMatch(/GET.*POST/);
    }
    const unknown = await app.inject({ method: 'PATCH', url: '/v1/nothing-here' });
    expectProblem(unknown, 404, 'not_found');
  });

  it('a body that is not JSON: 415 saying what to send', async () => {
    for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'application/xml']) {
      const res = await app.inject({
        method: 'POST',
        url: '/v1/queues/emails/jobs',
        headers: { 'content-type': type },
        payload: 'payload=1',
      });
      expectProblem(res, 415, 'unsupported_media_type');
      expect(JSON.parse(res.body).detail).toContain('Content-Type: application/json');
    }
  });

  it('a path outside the docs folder: a problem with a fitting code, not validation_failed', async () => {
    const res = await app.inject({ method: 'GET', url: '/docs/static/../../package.json' });
    expect(res.statusCode).toBeGreaterThanOrEqual(400);
    expect(res.statusCode).toBeLessThan(500);
    expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(JSON.parse(res.body).code).not.toBe('validation_failed');
  });

  it('a value only PostgreSQL refuses is a 400 from the one error handler, never a 500', async () => {
    const fresh = await buildApp({ config: testConfig(), databaseUrl: database.url });
    fresh.get('/data-exception', { config: { access: { scopes: ['producer'] } } }, async () => {
      await sql`SELECT ${'not a uuid'}::uuid`.execute(fresh.db);
    });
    try {
      const res = await fresh.inject({ method: 'GET', url: '/data-exception' });
      expectProblem(res, 400, 'validation_failed');
    } finally {
      await fresh.close();
    }
  });
});

describe('requests that cost only their sender', () => {
  it('a body nested a million levels deep is refused before it is parsed', async () => {
    const body = `{"payload":${'['.repeat(1_000_000)}${']'.repeat(1_000_000)}}`;
    const res = await app.inject({
      method: 'POST',
      url: '/v1/queues/edge-deep/jobs',
      headers: { 'content-type': 'application/json' },
      payload: body,
    });
    expectProblem(res, 400, 'validation_failed');
    expect(JSON.parse(res.body).errors).toEqual([
      { field: 'body', message: 'must not nest arrays and objects deeper than 128 levels' },
    ]);
  });

  it('a body that never finishes arriving gets 408 and the connection is closed', async () => {
    const { answer, closedAfterMs } = await rawRequest(
      'POST /v1/queues/edge-slow/jobs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n' +
        'Content-Length: 1000\r\n\r\n{',
      { holdOpenMs: 10_000 },
    );
    expect(answer).toMatch(/^HTTP\/1\.1 408 /);
    expect(answer).toContain('"code":"request_timeout"');
    expect(closedAfterMs).toBeLessThan(9_000);
  });

  it('a connection that never sends its headers is closed too', async () => {
    const { closedAfterMs } = await rawRequest('POST /v1/queues/edge-slow/jobs HTTP/1.1\r\nHost: x\r\n', {
      holdOpenMs: 10_000,
    });
    expect(closedAfterMs).toBeLessThan(9_000);
  });

  it('a long-poll longer than the request timeout is not cut short', async () => {
    const started = Date.now();
    const res = await fetch(`${server.url}/v1/queues/edge-poll/claim`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ wait_ms: 2500 }),
    });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ jobs: [] });
    expect(Date.now() - started).toBeGreaterThanOrEqual(2400);
  });
});
