import { beforeAll, describe, expect, it } from 'vitest';
import { encodeCursor } from '../../src/http/cursor.js';
import { useTestApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { api } from '../support/http.js';

/**
 * Every value is checked before it reaches PostgreSQL: a value PostgreSQL would refuse (a NUL in
 * text, a day that does not exist, a year outside its range) is a 400 naming the field, never the
 * catch-all "a value was refused" that names none. Query strings are as closed as bodies: an integer
 * is plain decimal digits, and a parameter a route does not know is refused.
 */
const database = useTestDatabase();
const app = useTestApp(database);

/** A 400 problem whose first error names `field`, and not the database's refusal. */
function expectRefused(res: { status: number; body: any }, field: string, what: string) {
  expect(res.status, `${what} → ${JSON.stringify(res.body)}`).toBe(400);
  expect(res.body.code, what).toBe('validation_failed');
  expect(res.body.errors?.[0]?.field, `${what} → ${JSON.stringify(res.body)}`).toBe(field);
  expect(res.body.detail, what).toContain(field);
  expect(res.body.detail, what).not.toMatch(/a value was refused/);
}

const get = (url: string) => api(app).call('GET', url);
const cursor = (...key: string[]) => encodeCursor(key);
const FEB_30 = '2026-02-30T00:00:00.000000Z';
const YEAR_0 = '0000-01-01T00:00:00.000000Z';

let jobId = '';
beforeAll(async () => {
  jobId = (await api(app).enqueue('rv-q', { payload: 1 })).body.id;
});

describe('values PostgreSQL refuses are refused first, naming the field', () => {
  it.each([
    ['/v1/jobs?state=dead&error=%00', 'error'],
    ['/v1/jobs?state=failing&error=smtp%00timeout', 'error'],
    [`/v1/jobs?state=dead&cursor=${cursor(YEAR_0, '1')}`, 'cursor'],
    [`/v1/jobs?state=failing&cursor=${cursor(FEB_30, '1')}`, 'cursor'],
    [`/v1/queues/rv-q/jobs?state=completed&cursor=${cursor(FEB_30, '1')}`, 'cursor'],
    [`/v1/queues/rv-q/jobs?state=scheduled&cursor=${cursor(YEAR_0, '1')}`, 'cursor'],
    [`/v1/queues/rv-q/jobs?state=ready&cursor=${cursor('0', '2026-04-31T00:00:00.000000Z', '1')}`, 'cursor'],
    [`/v1/queues/rv-q/jobs?state=dead&cursor=${cursor('2026-01-01T24:00:00.000000Z', '1')}`, 'cursor'],
    ['/v1/jobs?state=dead&since=2026-02-30T00:00:00Z', 'since'],
    ['/v1/jobs?state=dead&since=0000-01-01T00:00:00Z', 'since'],
  ])('GET %s: 400 naming %s', async (url, field) => {
    expectRefused(await get(url), field, url);
  });

  it.each([
    ['error', { state: 'dead', error: '\u0000' }],
    ['error', { state: 'failing', error: 'smtp\u0000' }],
    ['until', { state: 'dead', until: '2026-02-30T00:00:00Z' }],
    ['since', { state: 'dead', since: '0000-01-01T00:00:00Z' }],
  ])("a bulk action's match: 400 naming match.%s", async (field, match) => {
    const res = await api(app).call('POST', '/v1/jobs/bulk', { action: 'redrive', match });
    expectRefused(res, `match.${field}`, JSON.stringify(match));
  });

  it.each([
    ['run_at', { payload: 1, run_at: '2026-02-30T00:00:00Z' }],
    ['run_at', { payload: 1, run_at: '0000-01-01T00:00:00Z' }],
    ['expires_at', { payload: 1, expires_at: '2027-02-29T00:00:00Z' }],
  ])('an enqueue: 400 naming %s', async (field, body) => {
    expectRefused(await api(app).enqueue('rv-q', body), field, JSON.stringify(body));
  });

  it('every text, time and integer query parameter of every GET route, given a NUL, is a 400 naming it', async () => {
    const walked: string[] = [];
    for (const { url, params } of await getRoutes()) {
      for (const param of params) {
        const query = new URLSearchParams({ ...required(url), [param]: '\u0000' });
        const res = await get(`${url}?${query}`);
        expectRefused(res, param, `GET ${url}?${query}`);
        walked.push(`${url} ${param}`);
      }
    }
    // The routes whose query reached SQL unchecked before are among those walked.
    expect(walked).toEqual(
      expect.arrayContaining(['/v1/jobs error', '/v1/jobs cursor', '/v1/workers queue']),
    );
  });

  it('the SQS endpoint: a NUL in QueueNamePrefix or a tag is InvalidParameterValue naming it', async () => {
    const sqs = (action: string, body: object) =>
      app.inject({
        method: 'POST',
        url: '/',
        headers: { 'content-type': 'application/x-amz-json-1.0', 'x-amz-target': `AmazonSQS.${action}` },
        payload: JSON.stringify(body),
      });
    expect((await sqs('CreateQueue', { QueueName: 'rv-sqs' })).statusCode).toBe(200);
    const queueUrl = 'http://127.0.0.1/000000000000/rv-sqs';
    for (const [action, body, parameter] of [
      ['ListQueues', { QueueNamePrefix: 'rv\u0000' }, 'QueueNamePrefix'],
      ['TagQueue', { QueueUrl: queueUrl, Tags: { 'team\u0000': 'a' } }, 'Tags'],
      ['TagQueue', { QueueUrl: queueUrl, Tags: { team: 'a\u0000' } }, 'Tags.team'],
      ['CreateQueue', { QueueName: 'rv-sqs-2', tags: { team: '\u0000' } }, 'Tags.team'],
    ] as const) {
      const res = await sqs(action, body);
      expect(res.statusCode, res.body).toBe(400);
      expect(res.json().__type).toBe('com.amazonaws.sqs#InvalidParameterValue');
      expect(res.json().message).toContain(`parameter ${parameter} is invalid`);
    }
    const tags = await sqs('ListQueueTags', { QueueUrl: queueUrl });
    expect(tags.json()).toEqual({});
  });
});

describe('an integer in a query is written in plain decimal digits', () => {
  it.each(['0x10', '+5', '5e3', ' 5', '5 ', '-0', '05', '1.0', '1_000', ''])(
    'wait_ms=%j: 400 naming wait_ms',
    async (value) => {
      const url = `/v1/jobs/${jobId}?wait_ms=${encodeURIComponent(value)}`;
      const res = await get(url);
      expectRefused(res, 'wait_ms', url);
      expect(res.body.errors[0].message).toBe(
        'must be an integer written in plain decimal digits, such as 250',
      );
    },
  );

  it('plain integers are read as before', async () => {
    expect((await get(`/v1/jobs/${jobId}?wait_ms=0`)).status).toBe(200);
    expect((await get(`/v1/jobs/${jobId}?wait_ms=1`)).body.id).toBe(jobId);
    expect((await get('/v1/queues?limit=250')).status).toBe(200);
    expect((await get('/v1/queues/rv-q/history?minutes=5')).body.samples ?? []).toBeInstanceOf(Array);
    expectRefused(await get('/v1/queues?limit=501'), 'limit', 'limit=501');
  });

  it('every integer query parameter of every GET route refuses 0x10', async () => {
    const integers = (await getRoutes()).flatMap(({ url, integerParams }) =>
      integerParams.map((param) => ({ url, param })),
    );
    expect(integers.map((i) => i.param)).toEqual(expect.arrayContaining(['wait_ms', 'limit', 'minutes']));
    for (const { url, param } of integers) {
      const query = new URLSearchParams({ ...required(url), [param]: '0x10' });
      expectRefused(await get(`${url}?${query}`), param, `GET ${url}?${query}`);
    }
  });
});

describe('a query parameter a route does not know is refused on every route', () => {
  it('every GET route of the API document answers 400 naming it', async () => {
    const routes = await getRoutes();
    expect(routes.map((r) => r.url)).toEqual(
      expect.arrayContaining(['/v1/overview', '/v1/whoami', '/healthz', '/readyz', '/metrics']),
    );
    for (const { url } of routes) {
      const query = new URLSearchParams({ ...required(url), wait: '5000' });
      expectRefused(await get(`${url}?${query}`), 'wait', `GET ${url}?${query}`);
    }
  });

  it('and so do writes', async () => {
    const res = await api(app).call('POST', '/v1/queues/rv-q/jobs?priority=5', { payload: 1 });
    expectRefused(res, 'priority', 'POST /v1/queues/rv-q/jobs?priority=5');
  });

  it('the routes the document does not describe are left as they are', async () => {
    expect((await app.inject({ method: 'GET', url: '/ui?x=1' })).statusCode).toBe(200);
  });
});

/** Values for a route's required query parameters (a job list needs a state). */
const required = (url: string): Record<string, string> =>
  url === '/v1/queues/rv-q/jobs' ? { state: 'ready' } : url === '/v1/jobs' ? { state: 'dead' } : {};

interface GetRoute {
  url: string;
  /** The query parameters the document names. */
  params: string[];
  integerParams: string[];
}

/** Every GET operation of the served API document, its path parameters filled in. */
async function getRoutes(): Promise<GetRoute[]> {
  const doc = (await app.inject({ method: 'GET', url: '/openapi.json' })).json();
  const fill: Record<string, string> = { queue: 'rv-q', id: jobId, group: 'g', name: 'rv-s' };
  return Object.entries<Record<string, any>>(doc.paths).flatMap(([path, item]) => {
    const op = item.get;
    if (!op) return [];
    const query = (op.parameters ?? []).filter((p: any) => p.in === 'query');
    return [
      {
        url: path.replace(/\{(\w+)\}/g, (_, name: string) => fill[name] ?? name),
        params: query.map((p: any) => p.name),
        integerParams: query.filter((p: any) => p.schema?.type === 'integer').map((p: any) => p.name),
      },
    ];
  });
}
