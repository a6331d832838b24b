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
  if (res.statusCode >= 400 && !reachesSqs(method, url)) {
    expect(res.headers['content-type'], `${method} ${url}`).toMatch(/^application\/problem\+json/);
    const body = res.json();
    expect(body.status).toBe(res.statusCode);
    expect(body.code).toEqual(expect.any(String));
    expect(body.detail).toEqual(expect.any(String));
  }
  return res;
}

/**
 * `POST /` and `POST /{account}/{queue}` are the SQS endpoint (docs/sqs.md), which answers in SQS's
 * own error shapes; an odd path such as `/v1/..` resolves there.
 */
function reachesSqs(method: Method, url: string): boolean {
  const path = new URL(url, 'http://baton.test').pathname;
  return method === 'POST' && (path === '/' || /^\/\d{12}\/[^/]+$/.test(path));
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
        fc.constantFrom(
          'put',
          'get',
          'list',
          'pause',
          'resume',
          'purge',
          'redrive',
          'jobs',
          'delete',
          'history',
        ),
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
          fc.constantFrom('state', 'limit', 'cursor', 'order', 'include_payload', 'force', 'minutes', 'x'),
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
      case 'history':
        return send('GET', `${q}/history?${qs}`);
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

describe('honest traffic beside hostile traffic', () => {
  // A hostile tenant sends what once failed shared statements (see test/security/hostile-input.test.ts)
  // to the very queue an honest producer and worker use (so they would share group commits), and
  // random garbage besides, at the same time. The honest side must never see a 5xx, and every honest
  // job is done exactly once.
  const Q = 'honest.q';
  const POISON = [
    {
      url: '/v1/jobs/ack',
      body: { acks: [{ id: '1', lease_token: 'urn:uuid:00000000-0000-4000-8000-000000000000' }] },
    },
    { url: '/v1/jobs/1/ack', body: { lease_token: 'urn:uuid:00000000-0000-4000-8000-000000000000' } },
    { url: `/v1/queues/${Q}/claim`, body: { worker_id: 'w\ud800', max_jobs: 3 } },
    { url: `/v1/queues/${Q}/jobs`, body: { payload: 'p', run_at: '2030-01-01T00:00:00+23:00' } },
    { url: `/v1/queues/${Q}/jobs`, body: { payload: 'p', idempotency_key: 'k\ud800' } },
    { url: `/v1/queues/${Q}/jobs`, body: { payload: 'p', run_at: '2030-01-01T00:00:00+05' } },
    // Jobs that could never run (expired before they are due), single and in a batch.
    { url: `/v1/queues/${Q}/jobs`, body: { payload: 'p', expires_at: '2001-01-01T00:00:00Z' } },
    {
      url: `/v1/queues/${Q}/jobs/batch`,
      body: { jobs: [{ payload: 'p' }, { payload: 'p', delay_ms: 60_000, expires_in_ms: 60_000 }] },
    },
    { url: '/v1/jobs/0000000000000000001/cancel', body: undefined },
    { url: `/v1/queues/${Q}/redrive`, body: { dead_since: '2030-01-01T00:00:00+23:00' } },
  ];

  it('the honest producer and worker never see a 5xx, and every honest job completes once', async () => {
    const JOBS = 300;
    let stop = false;
    const honestFailures: string[] = [];
    const check = (what: string, status: number, body: string) => {
      if (status >= 500) honestFailures.push(`${what} → ${status} ${body.slice(0, 200)}`);
    };

    const hostile = async (seed: number) => {
      let i = seed;
      while (!stop) {
        const p = POISON[i++ % POISON.length]!;
        const res = await app.inject({
          method: 'POST',
          url: p.url,
          ...(p.body
            ? { payload: JSON.stringify(p.body), headers: { 'content-type': 'application/json' } }
            : {}),
        });
        expect(res.statusCode, `${p.url} ${res.body}`).toBeLessThan(500);
        const [text] = fc.sample(body(fieldsOf(['payload', 'worker_id', 'lease_token', 'run_at'])), 1);
        // Random bodies go to the attacker's own queue: a valid claim there must not take honest jobs.
        await send('POST', i % 2 ? '/v1/queues/fz.hostile/jobs' : '/v1/queues/fz.hostile/claim', text);
      }
    };

    const producer = async () => {
      for (let i = 0; i < JOBS; i++) {
        const res = await app.inject({
          method: 'POST',
          url: `/v1/queues/${Q}/jobs`,
          payload: { payload: { honest: i } },
        });
        check('enqueue', res.statusCode, res.body);
      }
    };

    const done = new Set<number>();
    const worker = async () => {
      while (done.size < JOBS) {
        const res = await app.inject({
          method: 'POST',
          url: `/v1/queues/${Q}/claim`,
          payload: { max_jobs: 5, wait_ms: 200, worker_id: 'honest' },
        });
        check('claim', res.statusCode, res.body);
        const jobs = res.statusCode === 200 ? res.json().jobs : [];
        for (const [n, job] of jobs.entries()) {
          const ack =
            n % 2
              ? await app.inject({
                  method: 'POST',
                  url: `/v1/jobs/${job.id}/ack`,
                  payload: { lease_token: job.lease_token },
                })
              : await app.inject({
                  method: 'POST',
                  url: '/v1/jobs/ack',
                  payload: { acks: [{ id: job.id, lease_token: job.lease_token }] },
                });
          check('ack', ack.statusCode, ack.body);
          if (typeof job.payload?.honest === 'number') done.add(job.payload.honest);
        }
      }
    };

    const attackers = [hostile(0), hostile(3), hostile(5)];
    await Promise.all([producer(), worker(), worker()]);
    stop = true;
    await Promise.all(attackers);
    expect(honestFailures).toEqual([]);
    const { rows } = await sql<{ n: number; distinct_jobs: number }>`
      SELECT count(*)::int AS n, count(DISTINCT payload->'honest')::int AS distinct_jobs
      FROM baton.job_history WHERE queue = ${Q} AND state = 'completed' AND payload ? 'honest'`.execute(
      database.db,
    );
    expect(rows[0]).toEqual({ n: JOBS, distinct_jobs: JOBS });
  }, 120_000);
});
