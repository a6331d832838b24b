import fs from 'node:fs';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { describe, expect, it } from 'vitest';
import { createBatonClient } from '../../openapi/client.js';
import { typesFromDocument } from '../../openapi/types.js';
import { useListeningApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';

const database = useTestDatabase();
const checkedIn = () => JSON.parse(fs.readFileSync('openapi/openapi.json', 'utf8'));

describe('the OpenAPI document', () => {
  const server = useListeningApp(database);
  const app = server.app;

  it('served at /openapi.json is the checked-in openapi/openapi.json (run `npm run openapi` after changing a route)', async () => {
    const served = (await app.inject({ method: 'GET', url: '/openapi.json' })).json();
    expect(served).toEqual(checkedIn());
  });

  it('and the checked-in client types are generated from it', async () => {
    expect(fs.readFileSync('openapi/schema.d.ts', 'utf8')).toBe(await typesFromDocument(checkedIn()));
  });

  it('is OpenAPI 3.1 with an operation id, tag, summary and problem responses on every operation', () => {
    const doc = checkedIn();
    expect(doc.openapi).toBe('3.1.0');
    const ids = new Set<string>();
    for (const [path, item] of Object.entries<Record<string, any>>(doc.paths)) {
      for (const [method, op] of Object.entries<any>(item)) {
        const where = `${method.toUpperCase()} ${path}`;
        expect(op.operationId, where).toEqual(expect.any(String));
        expect(ids.has(op.operationId), `${where} repeats an operationId`).toBe(false);
        ids.add(op.operationId);
        expect(op.tags?.length, where).toBeGreaterThan(0);
        expect(op.summary, where).toEqual(expect.any(String));
        expect(op.responses['503']?.content?.['application/problem+json'], where).toBeDefined();
        for (const [status, response] of Object.entries<any>(op.responses)) {
          expect(response.description, `${where} ${status}`).not.toBe('Default Response');
        }
        if (op.requestBody) {
          expect(op.responses['400'], `${where} takes a body, so it can answer 400`).toBeDefined();
        }
      }
    }
    for (const name of [
      'Job',
      'ClaimedJob',
      'EnqueuedJob',
      'EnqueueRequest',
      'JobError',
      'Queue',
      'Problem',
    ]) {
      expect(doc.components.schemas[name], name).toBeDefined();
    }
  });

  /** Every schema in the document, with where it sits (components included). */
  const schemasIn = (doc: any) => {
    const found: { at: string; schema: any }[] = [];
    const walk = (node: any, at: string, isSchema: boolean) => {
      if (Array.isArray(node)) {
        node.forEach((n, i) => {
          walk(n, `${at}[${i}]`, isSchema);
        });
        return;
      }
      if (!node || typeof node !== 'object') return;
      if (isSchema) found.push({ at, schema: node });
      for (const [key, value] of Object.entries<any>(node)) {
        const child = `${at}/${key}`;
        if (key === 'schema' || key === 'items') walk(value, child, true);
        else if (key === 'properties' || key === 'schemas') {
          for (const [name, sub] of Object.entries(value ?? {})) walk(sub, `${child}/${name}`, true);
        } else if (key === 'anyOf' || key === 'oneOf' || key === 'allOf') walk(value, child, true);
        else if (typeof value === 'object' && key !== 'examples' && key !== 'example')
          walk(value, child, false);
      }
    };
    walk(doc.paths, '#/paths', false);
    walk(doc.components, '#/components', false);
    return found;
  };

  it('holds only schemas that JSON Schema 2020-12 (the dialect of OpenAPI 3.1) accepts', () => {
    // The server does not check its schemas against the meta-schema when it starts (that cost
    // 110 ms of every start: src/http/validation.ts); this does, for every schema it declares.
    const ajv = new Ajv2020({ strict: false });
    for (const { at, schema } of schemasIn(checkedIn())) {
      expect(ajv.validateSchema(schema), `${at}: ${ajv.errorsText(ajv.errors)}`).toBe(true);
    }
  });

  it('names every request and response body, so every generator gives it a named type', () => {
    const doc = checkedIn();
    for (const [path, item] of Object.entries<Record<string, any>>(doc.paths)) {
      for (const [method, op] of Object.entries<any>(item)) {
        const bodies = [
          ['request', op.requestBody?.content?.['application/json']?.schema],
          ...Object.entries<any>(op.responses).map(([status, r]) => [
            status,
            (r.content?.['application/json'] ?? r.content?.['application/problem+json'])?.schema,
          ]),
        ];
        for (const [which, schema] of bodies) {
          if (schema === undefined) continue;
          expect(schema, `${method.toUpperCase()} ${path} ${which}`).toEqual({
            $ref: expect.stringMatching(/^#\/components\/schemas\/\w+$/),
          });
        }
      }
    }
  });

  it('has no inline schema twice, and none that copies a component (each copy is another anonymous type)', () => {
    const doc = checkedIn();
    const shape = (s: any): string =>
      JSON.stringify(s, (key, value) => (key === 'description' || key === 'examples' ? undefined : value));
    const seen = new Map<string, string>(
      Object.entries<any>(doc.components.schemas).map(
        ([name, s]) => [shape(s), `component ${name}`] as const,
      ),
    );
    for (const { at, schema } of schemasIn(doc)) {
      if (/^#\/components\/schemas\/\w+$/.test(at)) continue;
      // Objects and enums are what generators name; a bare string or integer is no type of its own.
      if (!schema.properties && !(schema.enum?.length > 1)) continue;
      const first = seen.get(shape(schema));
      expect(first, `${at} repeats ${first}`).toBeUndefined();
      seen.set(shape(schema), at);
    }
  });

  it('gives every integer its width and writes patterns only with syntax every regex dialect shares', () => {
    const INT32_MAX = 2 ** 31 - 1;
    for (const { at, schema } of schemasIn(checkedIn())) {
      if (schema.type === 'integer') {
        expect(['int32', 'int64'], `${at} says its width`).toContain(schema.format);
        if (schema.format === 'int32') {
          expect(Math.abs(schema.maximum ?? 0), at).toBeLessThanOrEqual(INT32_MAX);
          expect(Math.abs(schema.minimum ?? 0), at).toBeLessThanOrEqual(INT32_MAX + 1);
        }
      }
      // \uXXXX is not Go's or Rust's syntax (and @hey-api/openapi-ts writes it out as raw characters);
      // \p{...} is not Python's; both mean something else without JavaScript's u flag.
      if (schema.pattern) expect(schema.pattern, at).not.toMatch(/\\[up]/);
    }
  });

  it('serves an interactive page at /docs, titled Baton; / leads to the dashboard', async () => {
    const res = await app.inject({ method: 'GET', url: '/docs/' });
    expect(res.statusCode).toBe(200);
    expect(res.body).toMatch(/swagger/i);
    expect(res.body).toContain('<title>Baton API</title>');
    const root = await app.inject({ method: 'GET', url: '/' });
    expect(root.statusCode).toBe(302);
    // The dashboard is on by default; with BATON_UI=false, / leads to /docs (test/ui/serving.test.ts).
    expect(root.headers.location).toBe('/ui');
  });

  it('names the default server, so generated clients have a base URL', () => {
    expect(checkedIn().servers).toEqual([{ url: 'http://127.0.0.1:8080', description: expect.any(String) }]);
  });

  it('gives the /docs page a relative server, so Try it out calls the server that served it, on any port', async () => {
    const doc = (await app.inject({ method: 'GET', url: '/docs/json' })).json();
    expect(doc.servers).toEqual([{ url: '/', description: expect.any(String) }]);
    expect(doc.paths).toEqual(checkedIn().paths);
  });

  it("says the package's version", () => {
    const pkg = JSON.parse(fs.readFileSync('package.json', 'utf8'));
    expect(checkedIn().info.version).toBe(pkg.version);
  });

  it('drives the full job loop through the generated client', async () => {
    const baton = createBatonClient({ baseUrl: server.url });
    const queue = { params: { path: { queue: 'client-loop' } } };

    const enq = await baton.POST('/v1/queues/{queue}/jobs', {
      ...queue,
      body: { payload: { n: 1 }, priority: 2 },
    });
    expect(enq.response.status).toBe(201);
    expect(enq.data?.state).toBe('ready');
    await baton.POST('/v1/queues/{queue}/jobs/batch', { ...queue, body: { jobs: [{ payload: { n: 2 } }] } });

    const claimed = await baton.POST('/v1/queues/{queue}/claim', {
      ...queue,
      body: { max_jobs: 2, lease_ms: 30_000 },
    });
    const [first, second] = claimed.data!.jobs;
    expect(first!.id).toBe(enq.data!.id);

    const renewed = await baton.POST('/v1/jobs/{id}/renew', {
      params: { path: { id: first!.id } },
      body: { lease_token: first!.lease_token },
    });
    expect(renewed.data?.lease_ms).toBe(30_000);

    const acked = await baton.POST('/v1/jobs/{id}/ack', {
      params: { path: { id: first!.id } },
      body: { lease_token: first!.lease_token, result: { ok: true } },
    });
    expect(acked.data).toMatchObject({ state: 'completed', result: { ok: true } });

    const nacked = await baton.POST('/v1/jobs/{id}/nack', {
      params: { path: { id: second!.id } },
      body: { lease_token: second!.lease_token, error: { message: 'boom' }, dead: true },
    });
    expect(nacked.data).toMatchObject({ state: 'dead', dead_reason: 'nacked_dead' });

    // The nacked job's lease is gone: acking it now is refused.
    const stale = await baton.POST('/v1/jobs/{id}/ack', {
      params: { path: { id: second!.id } },
      body: { lease_token: second!.lease_token },
    });
    expect(stale.response.status).toBe(409);
    expect(stale.error).toMatchObject({ code: 'lease_lost' });
    expect(stale.response.headers.get('content-type')).toMatch(/^application\/problem\+json/);

    const got = await baton.GET('/v1/jobs/{id}', { params: { path: { id: second!.id } } });
    expect(got.data?.last_error?.message).toBe('boom');
  });
});
