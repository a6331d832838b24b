import fc from 'fast-check';
import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { useTestApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';

/**
 * Property-based fuzzing of every route. Whatever arrives (random bodies, wrong types, huge
 * numbers, deep nesting, unicode and control characters, malformed JSON, wrong content types, odd
 * path parameters), the answer is never a 5xx, every error is problem+json, and the database holds
 * exactly the jobs the accepted requests created.
 */
const database = useTestDatabase();
const app = useTestApp(database, { BATON_SHED_EVENT_LOOP_DELAY_MS: '0', BATON_SHED_POOL_WAITING: '0' });

const RUNS = Number(process.env.FUZZ_RUNS ?? 150);
let created = 0;
const fuzzQueues = new Set<string>();

type Method = 'GET' | 'POST' | 'PUT' | 'DELETE';

async function send(method: Method, url: string, payload?: string, contentType = 'application/json') {
  const res = await app.inject({
    method,
    url,
    ...(payload === undefined ? {} : { payload, headers: { 'content-type': contentType } }),
  });
  expect(
    res.statusCode,
    `${method} ${url} ${payload?.slice(0, 200)} → ${res.body.slice(0, 300)}`,
  ).toBeLessThan(500);
  if (res.statusCode >= 400) {
    expect(res.headers['content-type'], `${method} ${url}`).toMatch(/^application\/problem\+json/);
    const body = res.json();
    expect(body.status).toBe(res.statusCode);
    expect(body.code).toEqual(expect.any(String));
    expect(body.detail).toEqual(expect.any(String));
  }
  return res;
}

// --- generators ---------------------------------------------------------------------------------
const weirdNumber = fc.oneof(
  fc.constantFrom(
    0,
    -0,
    1,
    -1,
    2 ** 31,
    -(2 ** 31) - 1,
    2 ** 53,
    2 ** 63,
    1e308,
    -1e308,
    1e-308,
    0.5,
    1000,
    1001,
    20_000,
    43_200_001,
  ),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.integer(),
);
const weirdString = fc.oneof(
  fc.string(),
  fc.string({ unit: 'grapheme' }),
  fc.string({ unit: 'binary' }),
  fc.constantFrom(
    '',
    ' ',
    '\u0000',
    'a\u0000b',
    '\ud800',
    '\udfff',
    '\u202e',
    '\u{1F600}',
    'x'.repeat(300),
    '2026-01-01T00:00:00Z',
    '0000-01-01T00:00:00Z',
    '00000000-0000-4000-8000-000000000000',
  ),
);
function deep(depth: number): unknown {
  let v: unknown = 1;
  for (let i = 0; i < depth; i++) v = i % 2 ? { a: v } : [v];
  return v;
}
const weirdValue: fc.Arbitrary<unknown> = fc.oneof(
  weirdNumber,
  weirdString,
  fc.boolean(),
  fc.constant(null),
  fc.jsonValue(),
  fc.integer({ min: 1, max: 200 }).map(deep),
  fc.array(fc.jsonValue(), { maxLength: 5 }),
);
const fieldsOf = (names: string[]) =>
  fc.dictionary(fc.oneof(fc.constantFrom(...names), fc.string({ maxLength: 8 })), weirdValue, { maxKeys: 6 });

const ENQUEUE = ['payload', 'priority', 'delay_ms', 'run_at', 'max_attempts', 'idempotency_key'];
const queueName = fc.oneof(
  fc.stringMatching(/^[A-Za-z0-9._-]{1,20}$/).map((q) => `fz.${q}`),
  fc.constant('fz.main'),
);
const oddSegment = fc.oneof(
  fc.string({ maxLength: 300 }),
  fc.constantFrom(
    '..',
    '.',
    '%2e%2e',
    '%00',
    '%',
    '%zz',
    '9'.repeat(40),
    '-1',
    '0',
    ' ',
    'a b',
    'ü',
    '\u{1F600}',
  ),
);
const jobId = fc.oneof(
  fc.bigInt({ min: 0n, max: 2n ** 70n }).map(String),
  oddSegment,
  fc.constantFrom('1', '2', '3'),
);

function enc(segment: string): string {
  try {
    return encodeURIComponent(segment);
  } catch {
    return 'x'; // a lone surrogate cannot be URI-encoded
  }
}

// Bodies are sent as JSON text; some are not JSON at all.
const body = (fields: fc.Arbitrary<unknown>) =>
  fc.oneof(
    { weight: 6, arbitrary: fields.map((v) => JSON.stringify(v) ?? 'null') },
    {
      weight: 1,
      arbitrary: fc.string().filter((s) => {
        try {
          JSON.parse(s);
          return false;
        } catch {
          return true;
        }
      }),
    },
    { weight: 1, arbitrary: weirdValue.map((v) => JSON.stringify(v) ?? 'null') },
    {
      weight: 1,
      arbitrary: fc.constantFrom('', '{', '[1,', '{"payload": 1,}', '\u0000', 'null', '"x"', '[]'),
    },
  );

function countCreated(url: string, status: number, json: () => any) {
  if (status !== 201) return;
  if (url.endsWith('/jobs/batch'))
    created += json().jobs.filter((j: { created: boolean }) => j.created).length;
  else if (url.endsWith('/jobs')) created += 1;
}

describe('fuzzing every route', () => {
  it('enqueue and batch enqueue', async () => {
    await fc.assert(
      fc.asyncProperty(queueName, body(fieldsOf(ENQUEUE)), fc.boolean(), async (queue, payload, batch) => {
        fuzzQueues.add(queue);
        const url = `/v1/queues/${enc(queue)}/jobs${batch ? '/batch' : ''}`;
        const text = batch ? `{"jobs": [${payload}]}` : payload;
        const res = await send('POST', url, text);
        countCreated(url, res.statusCode, () => res.json());
      }),
      { numRuns: RUNS * 2 },
    );
    // Mostly-valid enqueues too, so the accounting below counts real jobs.
    await fc.assert(
      fc.asyncProperty(
        queueName,
        fc.jsonValue(),
        fc.option(fc.integer({ min: -5, max: 5 })),
        async (queue, payload, priority) => {
          fuzzQueues.add(queue);
          const url = `/v1/queues/${enc(queue)}/jobs`;
          const res = await send(
            'POST',
            url,
            JSON.stringify({ payload, ...(priority === null ? {} : { priority }) }),
          );
          countCreated(url, res.statusCode, () => res.json());
        },
      ),
      { numRuns: RUNS },
    );
  }, 120_000);

  it('claim, renew, ack, nack, batch ack, batch renew, cancel and get', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom('claim', 'renew', 'ack', 'nack', 'batch-ack', 'batch-renew', 'cancel', 'get'),
        queueName,
        jobId,
        body(
          fieldsOf([
            'max_jobs',
            'lease_ms',
            'wait_ms',
            'worker_id',
            'lease_token',
            'result',
            'error',
            'retry_in_ms',
            'dead',
            'acks',
            'renewals',
          ]),
        ),
        async (route, queue, id, payload) => {
          await callJobRoute(route, queue, id, payload);
        },
      ),
      { numRuns: RUNS * 2 },
    );
  }, 120_000);

  async function callJobRoute(route: string, queue: string, id: string, payload: string) {
    switch (route) {
      case 'claim':
        // wait_ms is capped so a valid long-poll cannot stall the run.
        return send(
          'POST',
          `/v1/queues/${enc(queue)}/claim`,
          payload.replace(/"wait_ms":\s*\d+/, '"wait_ms":0'),
        );
      case 'batch-ack':
        return send('POST', '/v1/jobs/ack', payload);
      case 'batch-renew':
        return send('POST', '/v1/jobs/renew', payload);
      case 'cancel':
        return send('POST', `/v1/jobs/${enc(id)}/cancel`);
      case 'get':
        return send('GET', `/v1/jobs/${enc(id)}`);
      default:
        return send('POST', `/v1/jobs/${enc(id)}/${route}`, payload);
    }
  }

  it('queue administration and listing', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom('put', 'get', 'list', 'pause', 'resume', 'purge', 'redrive', 'jobs', 'delete'),
        fc.oneof(queueName, oddSegment),
        body(
          fieldsOf([
            'lease_ms',
            'max_attempts',
            'backoff',
            'retention',
            'paused',
            'ids',
            'dead_since',
            'all',
          ]),
        ),
        fc.dictionary(
          fc.constantFrom('state', 'limit', 'cursor', 'order', 'include_payload', 'force', 'x'),
          weirdString,
          { maxKeys: 4 },
        ),
        async (route, queue, payload, query) => {
          await callQueueRoute(route, queue, payload, query);
        },
      ),
      { numRuns: RUNS * 2 },
    );
  }, 120_000);

  async function callQueueRoute(
    route: string,
    queue: string,
    payload: string,
    query: Record<string, string>,
  ) {
    const q = `/v1/queues/${enc(queue)}`;
    const qs = new URLSearchParams(
      Object.entries(query).map(([k, v]): [string, string] => [k, v.replaceAll('\u0000', '')]),
    ).toString();
    switch (route) {
      case 'put':
        return send('PUT', q, payload);
      case 'get':
        return send('GET', q);
      case 'list':
        return send('GET', `/v1/queues?${qs}`);
      case 'jobs':
        return send('GET', `${q}/jobs?${qs}`);
      case 'delete':
        return send('DELETE', `${q}?${qs}`);
      case 'redrive':
        return send('POST', `${q}/redrive`, payload);
      default:
        return send('POST', `${q}/${route}`);
    }
  }

  it('wrong content types, oversized bodies and odd paths', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(
          'text/plain',
          'application/xml',
          'application/x-www-form-urlencoded',
          'multipart/form-data',
          'application/json; charset=latin1',
          'application/jsonx',
          'garbage',
        ),
        fc.string(),
        async (type, text) => {
          const res = await send('POST', '/v1/queues/fz.types/jobs', text || 'x', type);
          expect([400, 415]).toContain(res.statusCode);
        },
      ),
      { numRuns: RUNS },
    );
    const big = await send(
      'POST',
      '/v1/queues/fz.big/jobs/batch',
      JSON.stringify({ jobs: [{ payload: 'x'.repeat(17 * 1024 * 1024) }] }),
    );
    expect(big.statusCode).toBe(413);
    const deepBody = await send(
      'POST',
      '/v1/queues/fz.deep/jobs',
      `{"payload": ${'['.repeat(100_000)}${']'.repeat(100_000)}}`,
    );
    expect(deepBody.statusCode).toBe(400);
    await fc.assert(
      fc.asyncProperty(
        fc.array(oddSegment, { minLength: 1, maxLength: 4 }),
        fc.constantFrom<Method>('GET', 'POST', 'PUT', 'DELETE'),
        async (segments, method) => {
          await send(
            method,
            `/v1/${segments.map(enc).join('/')}`,
            method === 'GET' || method === 'DELETE' ? undefined : '{}',
          );
        },
      ),
      { numRuns: RUNS },
    );
  }, 120_000);

  it('left the database holding exactly the jobs that accepted requests created', async () => {
    const queues = [...fuzzQueues];
    const { rows } = await sql<{ n: number }>`
      SELECT (SELECT count(*) FROM baton.jobs WHERE queue = ANY(${queues}::text[]))::int
           + (SELECT count(*) FROM baton.job_history WHERE queue = ANY(${queues}::text[]))::int AS n`.execute(
      database.db,
    );
    expect(created).toBeGreaterThan(0);
    expect(rows[0]!.n).toBe(created);
  });
});
