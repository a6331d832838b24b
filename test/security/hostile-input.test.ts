import fc from 'fast-check';
import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { encodeCursor } from '../../src/http/cursor.js';
import { useTestApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { api } from '../support/http.js';

/**
 * Values a request schema accepts must be values PostgreSQL accepts: otherwise one tenant's request
 * fails a statement that group commit shares with other tenants' requests. Each value below once
 * passed validation and then failed in the database (500 for the whole group).
 */
const database = useTestDatabase();
const app = useTestApp(database, { BATON_SHED_EVENT_LOOP_DELAY_MS: '0', BATON_SHED_POOL_WAITING: '0' });

const URN_TOKEN = 'urn:uuid:00000000-0000-4000-8000-000000000000';

async function raw(method: 'GET' | 'POST', url: string, body?: string) {
  const res = await app.inject({
    method,
    url,
    ...(body === undefined ? {} : { payload: body, headers: { 'content-type': 'application/json' } }),
  });
  return { status: res.statusCode, text: res.body, json: () => res.json() };
}

describe('values the database would refuse are refused by validation, naming the field', () => {
  it.each([
    ['ack', 'lease_token', (id: string) => [`/v1/jobs/${id}/ack`, { lease_token: URN_TOKEN }]],
    ['renew', 'lease_token', (id: string) => [`/v1/jobs/${id}/renew`, { lease_token: URN_TOKEN }]],
    ['nack', 'lease_token', (id: string) => [`/v1/jobs/${id}/nack`, { lease_token: URN_TOKEN }]],
    [
      'batch ack',
      'acks[0].lease_token',
      (id: string) => ['/v1/jobs/ack', { acks: [{ id, lease_token: URN_TOKEN }] }],
    ],
    [
      'batch renew',
      'renewals[0].lease_token',
      (id: string) => ['/v1/jobs/renew', { renewals: [{ id, lease_token: URN_TOKEN }] }],
    ],
    ['claim', 'worker_id', () => ['/v1/queues/hi-claim/claim', { worker_id: 'w\ud800' }]],
    [
      'enqueue',
      'idempotency_key',
      () => ['/v1/queues/hi-enq/jobs', { payload: 1, idempotency_key: 'k\ud800' }],
    ],
    ['enqueue', 'run_at', () => ['/v1/queues/hi-enq/jobs', { payload: 1, run_at: '2030-01-01T00:00:00+05' }]],
    ['redrive', 'ids[0]', () => ['/v1/queues/hi-enq/redrive', { ids: ['99999999999999999999'] }]],
  ] as const)('%s: %s', async (_, field, request) => {
    await api(app).enqueue('hi-claim', { payload: 1 });
    const [url, body] = request('1') as [string, object];
    const res = await api(app).call('POST', url, body);
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('validation_failed');
    expect(res.body.errors[0].field).toBe(field);
  });

  it('a run_at with any offset RFC 3339 allows is stored as the same instant in UTC', async () => {
    const res = await api(app).enqueue('hi-offset', { payload: 1, run_at: '2030-01-01T00:00:00+23:00' });
    expect(res.status).toBe(201);
    expect(res.body.run_at).toBe('2029-12-31T01:00:00.000Z');
    const dead = await api(app).call('POST', '/v1/queues/hi-offset/redrive', {
      dead_since: '2030-01-01T00:00:00-23:59',
    });
    expect(dead).toMatchObject({ status: 200, body: { redriven: 0 } });
  });

  it('a run_at without a full offset is refused with a message that says what to send', async () => {
    const res = await api(app).enqueue('hi-offset', { payload: 1, run_at: '2030-01-01T00:00:00+05' });
    expect(res.body.detail).toBe(
      'run_at must be an RFC 3339 date-time between 1970 and 9999, such as 2026-01-01T00:00:00Z',
    );
  });
});

describe('cursors are checked before any part of them reaches SQL', () => {
  const cursors: [string, string, unknown[]][] = [
    ['claimed', 'id beyond bigint', ['99999999999999999999']],
    ['claimed', 'padded id', ['0003']],
    ['ready', 'priority beyond integer', ['99999999999', '2026-01-01T00:00:00.000000Z', '1']],
    ['scheduled', 'date beyond the range', ['99999-01-01T00:00:00.000000Z', '1']],
    ['completed', 'a NUL', ['2026-01-01T00:00:00.000000Z\u0000', '1']],
    ['dead', 'a number instead of text', [1, '1']],
  ];
  it.each(cursors)('%s: %s', async (state, _, key) => {
    const res = await api(app).call(
      'GET',
      `/v1/queues/hi-cur/jobs?state=${state}&cursor=${encodeCursor(key)}`,
    );
    expect(res.status).toBe(400);
    expect(res.body.errors[0].field).toBe('cursor');
  });

  it('a queue-list cursor holding a NUL or a name no queue can have is 400', async () => {
    for (const key of [['a\u0000b'], ['no spaces'], ['x'.repeat(200)]]) {
      const res = await api(app).call('GET', `/v1/queues?cursor=${encodeCursor(key)}`);
      expect(res.status, JSON.stringify(key)).toBe(400);
    }
  });

  it('a cursor this server issued still pages every state', async () => {
    const q = 'hi-pages';
    await api(app).enqueueBatch(
      q,
      Array.from({ length: 5 }, (_, i) => ({ payload: i, priority: i % 2, delay_ms: i < 2 ? 60_000 : 0 })),
    );
    for (const state of ['ready', 'scheduled']) {
      const seen: string[] = [];
      let cursor: string | null = null;
      do {
        const page: { status: number; body: { jobs: { id: string }[]; next_cursor: string | null } } =
          await api(app).call(
            'GET',
            `/v1/queues/${q}/jobs?state=${state}&limit=1${cursor ? `&cursor=${cursor}` : ''}`,
          );
        expect(page.status).toBe(200);
        seen.push(...page.body.jobs.map((j) => j.id));
        cursor = page.body.next_cursor;
      } while (cursor);
      expect(seen).toHaveLength(state === 'ready' ? 3 : 2);
    }
  });
});

/** JSON text without the whitespace between tokens (strings kept as they are). */
function withoutSpaces(text: string): string {
  let out = '';
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (inString) {
      out += c;
      if (c === '\\') out += text[++i] ?? '';
      else if (c === '"') inString = false;
    } else if (c === '"') {
      inString = true;
      out += c;
    } else if (!/\s/.test(c)) out += c;
  }
  return out;
}

describe('payloads are kept exactly as sent', () => {
  it('numbers beyond a double, exponents and a __proto__ key survive enqueue, claim and GET', async () => {
    const payload =
      '{"id":9007199254740993,"huge":1e400,"fine":1.50,"__proto__":{"polluted":true},"list":[12345678901234567890]}';
    const enq = await raw('POST', '/v1/queues/hi-exact/jobs', `{"payload":${payload}}`);
    expect(enq.status).toBe(201);
    const claim = await raw('POST', '/v1/queues/hi-exact/claim', '{}');
    // The claim splices the payload in as PostgreSQL prints it (spaces after ':' and ','), so its
    // text is compared without the whitespace JSON ignores.
    const claimed = withoutSpaces(claim.text);
    expect(claimed).toContain('"id":9007199254740993');
    expect(claimed).toContain(`"huge":1${'0'.repeat(400)}`);
    expect(claimed).toContain('"fine":1.5');
    expect(claimed).toContain('"__proto__":{"polluted":true}');
    expect(claimed).toContain('[12345678901234567890]');
    const get = await raw('GET', `/v1/jobs/${enq.json().id}`);
    expect(get.text).toContain('"id":9007199254740993');
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    const stored = await sql<{ id: string }>`
      SELECT payload->>'id' AS id FROM baton.jobs WHERE id = ${enq.json().id}`.execute(database.db);
    expect(stored.rows[0]!.id).toBe('9007199254740993');
  });

  it('a result with a big number is stored and shown exactly', async () => {
    await api(app).enqueue('hi-exact-result', { payload: 1 });
    const [job] = (await api(app).claim('hi-exact-result')).body.jobs;
    const ack = await raw(
      'POST',
      `/v1/jobs/${job.id}/ack`,
      `{"lease_token":"${job.lease_token}","result":{"total":123456789012345678901234567890}}`,
    );
    expect(ack.status).toBe(200);
    expect(ack.text).toContain('"total":123456789012345678901234567890');
  });
});

describe('every string and time field, fuzzed against the database', () => {
  // Strings the schema might let through: whatever is accepted must be storable (never a 5xx).
  const tricky = fc.oneof(
    fc.string({ unit: 'binary', maxLength: 40 }),
    fc.string({ unit: 'grapheme', maxLength: 40 }),
    fc.constantFrom(
      '\ud800',
      'a\udfffb',
      '\u{1F600}',
      '\u0000',
      '\u007f',
      '\u202e',
      URN_TOKEN,
      '{}',
      "'; --",
    ),
  );
  // RFC 3339-shaped times with every offset, fraction and date the grammar allows, valid or not.
  const pad = (n: number, w: number) => String(n).padStart(w, '0');
  const rfc3339 = fc
    .record({
      y: fc.integer({ min: 0, max: 9999 }),
      mo: fc.integer({ min: 0, max: 13 }),
      d: fc.integer({ min: 0, max: 32 }),
      h: fc.integer({ min: 0, max: 24 }),
      mi: fc.integer({ min: 0, max: 60 }),
      s: fc.integer({ min: 0, max: 60 }),
      frac: fc.option(fc.stringMatching(/^[0-9]{1,9}$/)),
      sign: fc.constantFrom('+', '-'),
      oh: fc.integer({ min: 0, max: 24 }),
      om: fc.integer({ min: 0, max: 60 }),
      z: fc.boolean(),
    })
    .map(
      (t) =>
        `${pad(t.y, 4)}-${pad(t.mo, 2)}-${pad(t.d, 2)}T${pad(t.h, 2)}:${pad(t.mi, 2)}:${pad(t.s, 2)}` +
        `${t.frac === null ? '' : `.${t.frac}`}${t.z ? 'Z' : `${t.sign}${pad(t.oh, 2)}:${pad(t.om, 2)}`}`,
    );

  async function neverFails(url: string, body: object) {
    const res = await api(app).call('POST', url, body);
    expect(res.status, `${url} ${JSON.stringify(body)} → ${JSON.stringify(res.body)}`).toBeLessThan(500);
    return res;
  }

  it('run_at and dead_since: accepted means stored as that instant', async () => {
    await fc.assert(
      fc.asyncProperty(rfc3339, async (runAt) => {
        const res = await neverFails('/v1/queues/hi-fuzz-time/jobs', { payload: 1, run_at: runAt });
        if (res.status === 201) {
          expect(Date.parse(res.body.run_at)).toBe(
            Math.floor(Date.parse(runAt.replace(/\.(\d{3})\d*/, '.$1'))),
          );
        }
        await neverFails('/v1/queues/hi-fuzz-time/redrive', { dead_since: runAt });
      }),
      { numRuns: 300 },
    );
  });

  it('worker_id, idempotency_key, lease_token, error.message and ids', async () => {
    await api(app).enqueueBatch(
      'hi-fuzz-str',
      Array.from({ length: 50 }, (_, i) => ({ payload: i })),
    );
    await fc.assert(
      fc.asyncProperty(tricky, async (s) => {
        await neverFails('/v1/queues/hi-fuzz-str/claim', { worker_id: s, lease_ms: 1000 });
        await neverFails('/v1/queues/hi-fuzz-str/jobs', { payload: s, idempotency_key: s });
        await neverFails('/v1/jobs/1/ack', { lease_token: s });
        await neverFails('/v1/jobs/1/nack', { lease_token: s, error: { message: s } });
        await neverFails('/v1/jobs/renew', { renewals: [{ id: s, lease_token: s }] });
        await neverFails('/v1/queues/hi-fuzz-str/redrive', { ids: [s] });
      }),
      { numRuns: 150 },
    );
  });
});
