import { Ajv } from 'ajv';
import addFormatsModule from 'ajv-formats';
import fastJson from 'fast-json-stringify';
import { describe, expect, it } from 'vitest';
import { claimResponseJson } from '../../src/http/claim-response.js';
import { COMPONENTS } from '../../src/http/schemas/components.js';
import { ClaimedJob, ClaimResponse } from '../../src/http/schemas/jobs.js';
import { toClaimedJob } from '../../src/http/views.js';
import { claimJobs } from '../../src/jobs/claim/claim.js';
import { parseExact } from '../../src/json/exact.js';
import { useTestApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';

/**
 * The claim's answer is written by hand with each payload spliced in as PostgreSQL printed it
 * (src/http/claim-response.ts). It must say exactly what the schema serialiser says of the same
 * rows, be valid JSON for any payload, and match the ClaimResponse schema.
 */
const database = useTestDatabase();
const app = useTestApp(database);

/** Payloads as raw JSON text, so numbers a double cannot hold go in exactly as written. */
const PAYLOADS = [
  '{"id":9007199254740993,"huge":1e400,"scaled":1.50,"tiny":-0.000001,"neg":-12.5e-3}',
  '"just a string"',
  String.raw`{"s":"quote \" backslash \\ slash \/ nl \n cr \r tab \t bs \b ff \f ctl \u0001 \u001f del \u007f ls \u2028 ps \u2029"}`,
  '{"unicode":"héllo wörld ✓ 日本語 😀 \\ud83d\\ude00","key with \\"quotes\\" and ✓":{"😀":[true,false,null]}}',
  '{"a":[1,[2,[3,[4,{"b":{"c":{"d":[[[[[]]]]]}}}]]]],"e":{}}',
  '[]',
  'null',
  'true',
  '0',
  '-1.5E+300',
  '[12345678901234567890123456789,0.1,1e-7,100]',
  JSON.stringify({ blob: 'x'.repeat(100_000), list: Array.from({ length: 500 }, (_, i) => ({ i })) }),
];

const TRACE = {
  traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
  tracestate: 'congo=t61rcWkgMzE,q="quoted\\value"',
};

async function enqueueRaw(queue: string, jobs: string[]) {
  const res = await app.inject({
    method: 'POST',
    url: `/v1/queues/${queue}/jobs/batch`,
    headers: { 'content-type': 'application/json' },
    payload: `{"jobs":[${jobs.join(',')}]}`,
  });
  expect(res.statusCode, res.body).toBe(201);
}

const job = (payload: string, extra: Record<string, unknown> = {}) => {
  const rest = JSON.stringify(extra).slice(1, -1);
  return `{"payload":${payload}${rest ? `,${rest}` : ''}}`;
};

/** Parsed exactly, then written again: numbers compare as their text, key order as given. */
// ajv-formats is CommonJS: its default export is the function (as in src/http/validation.ts).
const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;

const canonical = (text: string) => JSON.stringify(parseExact(text));

describe('the hand-written claim response', () => {
  it('says exactly what the schema serialiser says of the same rows', async () => {
    await enqueueRaw(
      'cr-same',
      PAYLOADS.map((p, i) =>
        job(
          p,
          i % 3 === 0
            ? { group: `g"${i}"\\/` }
            : i % 3 === 1
              ? { ...TRACE, priority: -i }
              : { timeout_ms: 60_000 },
        ),
      ),
    );
    const rows = await claimJobs(app.db, {
      queue: 'cr-same',
      maxJobs: 100,
      defaultLeaseMs: 30_000,
      workerId: 'w "1"',
    });
    expect(rows).toHaveLength(PAYLOADS.length);
    const bySchema = fastJson(ClaimResponse as object, { schema: { ClaimedJob } as never });
    const ours = claimResponseJson(rows);
    const theirs = bySchema({ jobs: rows.map(toClaimedJob) });
    expect(canonical(ours)).toBe(canonical(theirs));
    // Plain JSON.parse accepts it too (numbers beyond a double are simply rounded there).
    expect(JSON.parse(ours).jobs).toHaveLength(PAYLOADS.length);
    expect(claimResponseJson([])).toBe('{"jobs":[]}');
  });

  it('answers the claim route: every payload as sent, valid against ClaimResponse', async () => {
    await enqueueRaw(
      'cr-route',
      PAYLOADS.map((p) => job(p, TRACE)),
    );
    const res = await app.inject({
      method: 'POST',
      url: '/v1/queues/cr-route/claim',
      payload: { max_jobs: 100 },
    });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(res.headers['x-request-id']).toBeTruthy();

    const ajv = addFormats(new Ajv({ strict: false }));
    ajv.addSchema(ClaimedJob as object);
    const validate = ajv.compile(ClaimResponse as object);
    const body = JSON.parse(res.body);
    expect(validate(body), JSON.stringify(validate.errors)).toBe(true);

    const claimed = parseExact(res.body) as { jobs: { id: string; payload: unknown }[] };
    for (const [i, j] of claimed.jobs.entries()) {
      // The same job read back through GET (the schema-serialised path) shows the same payload.
      const read = await app.inject({ method: 'GET', url: `/v1/jobs/${j.id}` });
      expect(JSON.stringify(j.payload)).toBe(JSON.stringify((parseExact(read.body) as any).payload));
      // And it is the value that was sent (PostgreSQL may print a number differently, e.g. 1e400).
      const sent = parseExact(PAYLOADS[i]!);
      if (!/e[+-]?\d|\.50|E\+/.test(PAYLOADS[i]!))
        expect(JSON.stringify(j.payload)).toBe(JSON.stringify(sent));
    }
    expect(claimed.jobs.map((j) => JSON.stringify(j.payload))[0]).toContain('9007199254740993');
    expect(body.jobs[0]).toMatchObject({ ...TRACE, attempt: 1, group: null });
  });

  it('splices the next jobs of ack-and-claim into the schema-serialised answer: ack, nack and batch ack', async () => {
    await enqueueRaw(
      'cr-next',
      PAYLOADS.map((p) => job(p, TRACE)),
    );
    const ajv = addFormats(new Ajv({ strict: false }));
    for (const schema of COMPONENTS) ajv.addSchema(schema as object);
    const validAs = (id: string, body: unknown) => {
      const validate = ajv.getSchema(id)!;
      expect(validate(body), JSON.stringify(validate.errors)).toBe(true);
    };
    const post = async (url: string, payload: object) => {
      const res = await app.inject({ method: 'POST', url, payload });
      expect(res.statusCode, res.body).toBe(200);
      expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
      expect(res.headers['x-request-id']).toBeTruthy();
      return res.body;
    };
    const claim = await post('/v1/queues/cr-next/claim', { max_jobs: 1 });
    let held = (parseExact(claim) as { jobs: { id: string; lease_token: string }[] }).jobs;
    const seen: string[] = [];
    // Through every route with next, one job at a time, then two at once: every payload as stored.
    for (let i = 0; held.length > 0; i++) {
      const [first] = held;
      const route = i % 3;
      const text =
        route === 0
          ? await post(`/v1/jobs/${first!.id}/ack`, {
              lease_token: first!.lease_token,
              next: { max_jobs: 1 },
            })
          : route === 1
            ? await post(`/v1/jobs/${first!.id}/nack`, {
                lease_token: first!.lease_token,
                dead: true,
                next: { max_jobs: 2 },
              })
            : await post('/v1/jobs/ack', {
                acks: held.map((j) => ({ id: j.id, lease_token: j.lease_token })),
                next: { max_jobs: 1 },
              });
      const body = JSON.parse(text);
      validAs(route === 2 ? 'BatchAckResponse' : 'JobAndNext', body);
      if (route !== 2) expect(body.id).toBe(first!.id);
      const next = (parseExact(text) as { next: { id: string; payload: unknown }[] }).next;
      for (const j of next) {
        const read = await app.inject({ method: 'GET', url: `/v1/jobs/${j.id}` });
        expect(JSON.stringify(j.payload)).toBe(JSON.stringify((parseExact(read.body) as any).payload));
        seen.push(j.id);
      }
      if (next.length > 0) expect(body.next[0]).toMatchObject({ ...TRACE, attempt: 1, group: null });
      // The nack takes two: the batch ack that follows acks both.
      held = body.next;
      if (route === 1 && held.length < 2) break;
    }
    expect(seen.length).toBeGreaterThan(3);
  });
});
