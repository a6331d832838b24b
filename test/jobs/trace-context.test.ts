import { describe, expect, it } from 'vitest';
import { useTestApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { api } from '../support/http.js';

/** W3C trace context travels from the producer's enqueue to every claim and read of the job. */
const database = useTestDatabase();
const app = useTestApp(database);

const PARENT = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
const STATE = 'rojo=00f067aa0ba902b7,congo=t61rcWkgMzE';

async function enqueueWithHeaders(queue: string, body: object, headers: Record<string, string>) {
  const res = await app.inject({ method: 'POST', url: `/v1/queues/${queue}/jobs`, payload: body, headers });
  return { status: res.statusCode, body: res.json() };
}

describe('trace context', () => {
  it('from the traceparent and tracestate headers of an enqueue, to the claim and the job', async () => {
    const enq = await enqueueWithHeaders(
      'tc-headers',
      { payload: 1 },
      { traceparent: PARENT, tracestate: STATE },
    );
    expect(enq.status).toBe(201);
    const [claimed] = (await api(app).claim('tc-headers')).body.jobs;
    expect(claimed).toMatchObject({ id: enq.body.id, traceparent: PARENT, tracestate: STATE });
    await api(app).ack(claimed.id, { lease_token: claimed.lease_token });
    // Kept in history too: a job read after it completed still names the trace.
    expect((await api(app).get(claimed.id)).body).toMatchObject({ traceparent: PARENT, tracestate: STATE });
  });

  it('from fields of each job of a batch; the header is the default for jobs without their own', async () => {
    const own = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00';
    const res = await app.inject({
      method: 'POST',
      url: '/v1/queues/tc-batch/jobs/batch',
      headers: { traceparent: PARENT },
      payload: { jobs: [{ payload: 1, traceparent: own, tracestate: 'a=1' }, { payload: 2 }] },
    });
    expect(res.statusCode).toBe(201);
    const claimed = (await api(app).claim('tc-batch', { max_jobs: 2 })).body.jobs;
    expect(
      claimed.map((j: { traceparent: string; tracestate: string | null }) => [j.traceparent, j.tracestate]),
    ).toEqual([
      [own, 'a=1'],
      [PARENT, null],
    ]);
  });

  it('is null when none was given, and through a nack, a retry and a re-claim it stays', async () => {
    const plain = await api(app).enqueue('tc-none', { payload: 1 });
    expect((await api(app).get(plain.body.id)).body).toMatchObject({ traceparent: null, tracestate: null });
    await api(app).enqueue('tc-retry', { payload: 1, traceparent: PARENT });
    const [first] = (await api(app).claim('tc-retry')).body.jobs;
    await api(app).nack(first.id, { lease_token: first.lease_token, retry_in_ms: 0 });
    const [second] = (await api(app).claim('tc-retry')).body.jobs;
    expect(second).toMatchObject({ id: first.id, attempt: 2, traceparent: PARENT });
  });

  it('ignores an invalid header, as the specification asks, but refuses an invalid field with a 400 naming it', async () => {
    for (const bad of [
      'ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
      'junk',
      `${PARENT}-extra`,
    ]) {
      const enq = await enqueueWithHeaders('tc-bad', { payload: 1 }, { traceparent: bad });
      expect(enq.status, bad).toBe(201);
      expect((await api(app).get(enq.body.id)).body.traceparent).toBeNull();
    }
    const cases: [object, string][] = [
      [{ traceparent: 'junk' }, 'traceparent'],
      [{ traceparent: '00-00000000000000000000000000000000-00f067aa0ba902b7-01' }, 'traceparent'],
      [{ traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01' }, 'traceparent'],
      [{ traceparent: PARENT.toUpperCase() }, 'traceparent'],
      [{ tracestate: 'a=1' }, 'tracestate'],
      [{ traceparent: PARENT, tracestate: 'x'.repeat(513) }, 'tracestate'],
      [{ traceparent: PARENT, tracestate: 'a=\u0001' }, 'tracestate'],
    ];
    for (const [fields, field] of cases) {
      const res = await api(app).enqueue('tc-bad', { payload: 1, ...fields });
      expect(res.status, JSON.stringify(fields)).toBe(400);
      expect(res.body.errors[0].field).toBe(field);
    }
  });
});
