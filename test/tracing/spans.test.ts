import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BatonApp } from '../../src/app.js';
import type { ConfigError } from '../../src/config.js';
import { NO_TRACING } from '../../src/tracing/tracing.js';
import { json, startReceiver } from '../push/receiver.js';
import { createTestApp, testConfig } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { api } from '../support/http.js';
import { KIND, type ReceivedSpan, startOtlpReceiver } from '../support/otlp-receiver.js';
import { until } from '../support/until.js';

/**
 * Baton's spans, exported over OTLP/HTTP to a receiver started here: a producer's trace continues
 * through Baton's enqueue span, the job carries that span's context to its worker, and the claim,
 * ack, nack and push spans join the traces they concern, as a trace backend would show them.
 */
const database = useTestDatabase();
let collector: Awaited<ReturnType<typeof startOtlpReceiver>>;
let app: BatonApp;
const apps: BatonApp[] = [];
const closers: (() => Promise<void>)[] = [];

async function tracedApp(env: Record<string, string> = {}) {
  const made = await createTestApp(database, { OTEL_EXPORTER_OTLP_ENDPOINT: collector.url, ...env });
  apps.push(made);
  return made;
}

beforeAll(async () => {
  collector = await startOtlpReceiver();
  app = await tracedApp({
    OTEL_SERVICE_NAME: 'baton-test',
    OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment.name=ci',
  });
});
afterAll(async () => {
  await Promise.all(apps.map((a) => a.close()));
  for (const close of closers) await close();
  await collector.close();
});

const hex = (n: number, seed: string) => seed.repeat(n).slice(0, n);
const traceparent = (traceId: string, spanId: string, flags = '01') => `00-${traceId}-${spanId}-${flags}`;
const partsOf = (tp: string) => {
  const [, traceId, spanId, flags] = tp.split('-');
  return { traceId: traceId!, spanId: spanId!, flags: flags! };
};

/** The first span `match` finds once exported (spans go out within a second). */
async function span(match: (s: ReceivedSpan) => boolean): Promise<ReceivedSpan> {
  await until(() => collector.spans.some(match), 10_000);
  return collector.spans.find(match)!;
}

function inject(target: BatonApp, method: 'GET' | 'POST', url: string, payload?: object, tp?: string) {
  return target.inject({
    method,
    url,
    ...(payload ? { payload } : {}),
    ...(tp ? { headers: { traceparent: tp } } : {}),
  });
}

describe("Baton's spans", () => {
  it("continue a producer's trace through enqueue; the job carries the enqueue span to its worker; claim links it, ack and nack join it", async () => {
    const producerTrace = hex(32, '4bf92f3577b34da6');
    const producer = traceparent(producerTrace, hex(16, '00f067aa0ba902b7'));
    const enq = await inject(app, 'POST', '/v1/queues/tr-life/jobs', { payload: { n: 1 } }, producer);
    expect(enq.statusCode).toBe(201);
    const id = enq.json().id as string;

    const enqueue = await span((s) => s.name === 'enqueue tr-life');
    expect(enqueue).toMatchObject({
      traceId: producerTrace,
      parentSpanId: partsOf(producer).spanId,
      kind: KIND.producer,
      attributes: {
        'messaging.system': 'baton',
        'messaging.operation.type': 'send',
        'messaging.operation.name': 'enqueue',
        'messaging.destination.name': 'tr-life',
        'messaging.message.id': id,
      },
      resource: { 'service.name': 'baton-test', 'deployment.environment.name': 'ci' },
    });
    expect(enqueue.resource['service.version']).toMatch(/^\d+\.\d+\.\d+/);
    // The job's trace context is now Baton's enqueue span, in the producer's trace.
    const carried = traceparent(producerTrace, enqueue.spanId);
    expect((await api(app).get(id)).body.traceparent).toBe(carried);

    // A worker claims inside a trace of its own; the claim span links the job's.
    const workerTrace = hex(32, 'a1b2c3d4e5f60718');
    const worker = traceparent(workerTrace, hex(16, '1122334455667788'));
    const claim = await inject(app, 'POST', '/v1/queues/tr-life/claim', { max_jobs: 5 }, worker);
    const [job] = claim.json().jobs;
    expect(job.traceparent).toBe(carried);
    const claimSpan = await span((s) => s.name === 'claim tr-life');
    expect(claimSpan).toMatchObject({
      traceId: workerTrace,
      parentSpanId: partsOf(worker).spanId,
      kind: KIND.consumer,
      links: [{ traceId: producerTrace, spanId: enqueue.spanId }],
      attributes: { 'messaging.operation.type': 'receive', 'messaging.batch.message_count': 1 },
    });

    // The ack names no trace: its span joins the job's, under the enqueue span.
    const ack = await api(app).ack(id, { lease_token: job.lease_token, result: { ok: true } });
    expect(ack.status).toBe(200);
    const ackSpan = await span((s) => s.name === 'ack tr-life');
    expect(ackSpan).toMatchObject({
      traceId: producerTrace,
      parentSpanId: enqueue.spanId,
      attributes: {
        'messaging.operation.type': 'settle',
        'messaging.message.id': id,
        'baton.outcome': 'done',
        'baton.job.state': 'completed',
      },
    });

    // A nack sent inside the worker's trace joins that one.
    const second = await inject(app, 'POST', '/v1/queues/tr-life/jobs', { payload: { n: 2 } }, producer);
    const claimed = (await api(app).claim('tr-life')).body.jobs[0];
    expect(claimed.id).toBe(second.json().id);
    const processing = traceparent(workerTrace, hex(16, '99aabbccddeeff00'));
    const nack = await inject(
      app,
      'POST',
      `/v1/jobs/${claimed.id}/nack`,
      { lease_token: claimed.lease_token, error: { message: 'no' } },
      processing,
    );
    expect(nack.statusCode).toBe(200);
    const nackSpan = await span((s) => s.name === 'nack tr-life');
    expect(nackSpan).toMatchObject({
      traceId: workerTrace,
      parentSpanId: partsOf(processing).spanId,
      attributes: { 'messaging.message.id': claimed.id, 'baton.outcome': 'done' },
    });
    // A lease that is no longer held is a span too, saying so.
    await api(app).ack(id, { lease_token: claimed.lease_token });
    const lost = await inject(app, 'POST', `/v1/jobs/${claimed.id}/ack`, { lease_token: job.lease_token });
    expect(lost.statusCode).toBe(409);
    await span(
      (s) =>
        s.attributes['messaging.message.id'] === claimed.id && s.attributes['baton.outcome'] === 'lease_lost',
    );
  });

  it('a batch: jobs without a trace of their own carry the enqueue span; one with its own keeps it, and the span links it', async () => {
    const requestTrace = hex(32, '0af7651916cd43dd');
    const request = traceparent(requestTrace, hex(16, 'b7ad6b7169203331'));
    const ownTrace = hex(32, 'cafebabe12345678');
    const own = traceparent(ownTrace, hex(16, 'feedfacefeedface'));
    const enq = await inject(
      app,
      'POST',
      '/v1/queues/tr-batch/jobs/batch',
      { jobs: [{ payload: 1 }, { payload: 2, traceparent: own }, { payload: 3 }] },
      request,
    );
    expect(enq.statusCode).toBe(201);
    const ids = enq.json().jobs.map((j: { id: string }) => j.id);
    const enqueue = await span((s) => s.name === 'enqueue tr-batch');
    expect(enqueue).toMatchObject({
      traceId: requestTrace,
      parentSpanId: partsOf(request).spanId,
      links: [{ traceId: ownTrace, spanId: partsOf(own).spanId }],
      attributes: { 'messaging.batch.message_count': 3 },
    });
    const traces = await Promise.all(
      ids.map(async (id: string) => (await api(app).get(id)).body.traceparent),
    );
    const carried = traceparent(requestTrace, enqueue.spanId);
    expect(traces).toEqual([carried, own, carried]);

    // A claim of several jobs links each of their traces once.
    const claim = await api(app).claim('tr-batch', { max_jobs: 3 });
    expect(claim.body.jobs).toHaveLength(3);
    const claimSpan = await span((s) => s.name === 'claim tr-batch');
    expect(new Set(claimSpan.links.map((l) => `${l.traceId}-${l.spanId}`))).toEqual(
      new Set([`${requestTrace}-${enqueue.spanId}`, `${ownTrace}-${partsOf(own).spanId}`]),
    );
    // Without a traceparent the claim span starts a trace of its own.
    expect(claimSpan.parentSpanId).toBeUndefined();
    const acks = claim.body.jobs.map((j: { id: string; lease_token: string }) => ({
      id: j.id,
      lease_token: j.lease_token,
    }));
    expect((await api(app).ackBatch(acks)).status).toBe(200);
    const ackSpan = await span((s) => s.name === 'ack tr-batch');
    expect(ackSpan.attributes).toMatchObject({ 'messaging.batch.message_count': 3, 'baton.acked': 3 });
  });

  it('a job enqueued with no trace at all starts one at Baton, which its worker continues', async () => {
    const enq = await api(app).enqueue('tr-root', { payload: {} });
    const enqueue = await span((s) => s.name === 'enqueue tr-root');
    expect(enqueue.parentSpanId).toBeUndefined();
    expect((await api(app).get(enq.body.id)).body.traceparent).toBe(
      traceparent(enqueue.traceId, enqueue.spanId),
    );
  });

  it("keep the producer's tracestate with the context a job carries", async () => {
    const producer = traceparent(hex(32, '1234abcd5678ef90'), hex(16, '0f0e0d0c0b0a0908'));
    const enq = await app.inject({
      method: 'POST',
      url: '/v1/queues/tr-state/jobs',
      payload: { payload: {} },
      headers: { traceparent: producer, tracestate: 'vendor=opaque,other=1' },
    });
    const enqueue = await span((s) => s.name === 'enqueue tr-state');
    const job = (await api(app).get(enq.json().id)).body;
    expect([job.traceparent, job.tracestate]).toEqual([
      traceparent(partsOf(producer).traceId, enqueue.spanId),
      'vendor=opaque,other=1',
    ]);
  });

  it('an ack that claims the next jobs links them', async () => {
    const enq = await api(app).enqueueBatch('tr-next', [{ payload: 1 }, { payload: 2 }]);
    const [first, second] = await Promise.all(
      enq.body.jobs.map(
        async (j: { id: string }) => (await api(app).get(j.id)).body as { id: string; traceparent: string },
      ),
    );
    const claimed = (await api(app).claim('tr-next')).body.jobs[0];
    expect(claimed.id).toBe(first!.id);
    const ack = await api(app).ack(claimed.id, { lease_token: claimed.lease_token, next: { max_jobs: 1 } });
    expect(ack.body.next.map((j: { id: string }) => j.id)).toEqual([second!.id]);
    const ackSpan = await span((s) => s.name === 'ack tr-next');
    expect(ackSpan.traceId).toBe(partsOf(first!.traceparent).traceId);
    expect(ackSpan.links).toEqual(
      [partsOf(second!.traceparent)].map(({ traceId, spanId }) => ({ traceId, spanId })),
    );
  });

  it('SQS: SendMessage, ReceiveMessage and DeleteMessage are spans in the traces their requests carry', async () => {
    const sqs = async (action: string, body: object, tp?: string) => {
      const res = await app.inject({
        method: 'POST',
        url: '/',
        headers: {
          'content-type': 'application/x-amz-json-1.0',
          'x-amz-target': `AmazonSQS.${action}`,
          ...(tp ? { traceparent: tp } : {}),
        },
        payload: JSON.stringify(body),
      });
      expect(res.statusCode, res.body).toBe(200);
      return res.json();
    };
    const { QueueUrl } = await sqs('CreateQueue', { QueueName: 'tr-sqs' });
    const sender = traceparent(hex(32, '5e5e5e5e12121212'), hex(16, '3434343456565656'));
    const sent = await sqs('SendMessage', { QueueUrl, MessageBody: 'hello' }, sender);
    const enqueue = await span((s) => s.name === 'enqueue tr-sqs');
    expect(enqueue).toMatchObject({
      traceId: partsOf(sender).traceId,
      parentSpanId: partsOf(sender).spanId,
      attributes: { 'messaging.message.id': sent.MessageId },
    });
    const receiver = traceparent(hex(32, '7a7a7a7a13131313'), hex(16, '8989898900000001'));
    const { Messages } = await sqs('ReceiveMessage', { QueueUrl, MaxNumberOfMessages: 1 }, receiver);
    expect(Messages).toHaveLength(1);
    const claimSpan = await span((s) => s.name === 'claim tr-sqs');
    expect(claimSpan).toMatchObject({
      traceId: partsOf(receiver).traceId,
      links: [{ traceId: partsOf(sender).traceId, spanId: enqueue.spanId }],
    });
    await sqs('DeleteMessage', { QueueUrl, ReceiptHandle: Messages[0].ReceiptHandle }, receiver);
    const ackSpan = await span((s) => s.name === 'ack tr-sqs');
    expect(ackSpan).toMatchObject({
      traceId: partsOf(receiver).traceId,
      parentSpanId: partsOf(receiver).spanId,
    });
  });

  it('push: the delivery is a client span under the enqueue span, its request carries the span, and the ack joins it', async () => {
    const pushApp = await tracedApp({ BATON_PUSH: 'true', BATON_PUSH_ALLOW: '127.0.0.1' });
    const endpoint = await startReceiver((_, res) => json(res, 200, { ok: true }));
    closers.push(endpoint.close);
    expect((await api(pushApp).call('PUT', '/v1/queues/tr-push/push', { url: endpoint.url })).status).toBe(
      201,
    );
    const producer = traceparent(hex(32, 'd00dfeedd00dfeed'), hex(16, 'abcdef0123456789'));
    const enq = await inject(pushApp, 'POST', '/v1/queues/tr-push/jobs', { payload: { to: 'x' } }, producer);
    const id = enq.json().id as string;
    await until(() => endpoint.received.length === 1, 15_000);
    const push = await span((s) => s.name === 'push tr-push');
    const enqueue = await span((s) => s.name === 'enqueue tr-push');
    expect(push).toMatchObject({
      traceId: partsOf(producer).traceId,
      parentSpanId: enqueue.spanId,
      kind: KIND.client,
      attributes: {
        'messaging.message.id': id,
        'http.request.method': 'POST',
        'http.response.status_code': 200,
        'server.address': '127.0.0.1',
      },
    });
    expect(endpoint.received[0]!.headers.traceparent).toBe(traceparent(push.traceId, push.spanId));
    const ackSpan = await span((s) => s.name === 'ack tr-push');
    expect(ackSpan).toMatchObject({ traceId: push.traceId, parentSpanId: push.spanId });
  });

  it('an endpoint that fails marks its push span failed', async () => {
    const pushApp = await tracedApp({ BATON_PUSH: 'true', BATON_PUSH_ALLOW: '127.0.0.1' });
    const endpoint = await startReceiver((_, res) => json(res, 500, { error: 'down' }));
    closers.push(endpoint.close);
    await api(pushApp).call('PUT', '/v1/queues/tr-push-fail', { max_attempts: 1 });
    await api(pushApp).call('PUT', '/v1/queues/tr-push-fail/push', { url: endpoint.url });
    await api(pushApp).enqueue('tr-push-fail', { payload: {} });
    const push = await span((s) => s.name === 'push tr-push-fail');
    expect(push.status).toMatchObject({ code: 2, message: 'the endpoint answered 500' });
    expect(push.attributes['http.response.status_code']).toBe(500);
    await span((s) => s.name === 'nack tr-push-fail' && s.parentSpanId === push.spanId);
  });

  it('a collector that cannot be reached costs the requests nothing', async () => {
    const down = await startOtlpReceiver();
    await down.close();
    const lonely = await tracedApp({ OTEL_EXPORTER_OTLP_ENDPOINT: down.url });
    const enq = await api(lonely).enqueue('tr-down', { payload: {} });
    expect(enq.status).toBe(201);
    const claim = await api(lonely).claim('tr-down');
    expect(claim.body.jobs).toHaveLength(1);
    const ack = await api(lonely).ack(claim.body.jobs[0].id, { lease_token: claim.body.jobs[0].lease_token });
    expect(ack.status).toBe(200);
    // Closing sends what is buffered, which fails, and still closes.
    await lonely.close();
    apps.splice(apps.indexOf(lonely), 1);
  });

  it('a sampler that records nothing exports nothing, and jobs still carry the trace they were given', async () => {
    const quiet = await tracedApp({ OTEL_TRACES_SAMPLER: 'always_off' });
    const producer = traceparent(hex(32, '0123456789abcdef'), hex(16, 'fedcba9876543210'));
    const enq = await inject(quiet, 'POST', '/v1/queues/tr-quiet/jobs', { payload: {} }, producer);
    const carried = (await api(quiet).get(enq.json().id)).body.traceparent;
    expect(partsOf(carried).traceId).toBe(partsOf(producer).traceId);
    const claim = await api(quiet).claim('tr-quiet');
    await api(quiet).ack(claim.body.jobs[0].id, { lease_token: claim.body.jobs[0].lease_token });
    await quiet.close();
    apps.splice(apps.indexOf(quiet), 1);
    expect(collector.spans.filter((s) => s.name.endsWith('tr-quiet'))).toEqual([]);
  });
});

describe('tracing off', () => {
  it('is the default: no SDK, and a job carries the producer trace as given', async () => {
    const plain = await createTestApp(database);
    apps.push(plain);
    expect(plain.tracing).toBe(NO_TRACING);
    const producer = traceparent(hex(32, '4bf92f3577b34da6'), hex(16, '00f067aa0ba902b7'));
    const enq = await inject(plain, 'POST', '/v1/queues/tr-off/jobs', { payload: {} }, producer);
    expect((await api(plain).get(enq.json().id)).body.traceparent).toBe(producer);
    const without = await api(plain).enqueue('tr-off', { payload: {} });
    expect((await api(plain).get(without.body.id)).body.traceparent).toBeNull();
  });

  it('OTEL_SDK_DISABLED turns it off whatever endpoint is set', async () => {
    const off = await createTestApp(database, {
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${collector.url}/v1/traces`,
      OTEL_SDK_DISABLED: 'true',
    });
    apps.push(off);
    expect(off.tracing).toBe(NO_TRACING);
  });
});

describe("tracing's settings", () => {
  const problems = (env: Record<string, string>) => {
    try {
      testConfig(env);
    } catch (err) {
      return (err as ConfigError).problems;
    }
    return [];
  };

  it('read the headers and resource attributes as OpenTelemetry writes them', () => {
    const config = testConfig({
      OTEL_EXPORTER_OTLP_HEADERS: 'api-key=s%20cret, x-team = queues',
      OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment.name=prod,service.namespace=jobs',
      OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
      OTEL_TRACES_SAMPLER_ARG: '0.25',
    });
    expect(config.otelHeaders).toEqual({ 'api-key': 's cret', 'x-team': 'queues' });
    expect(config.otelResourceAttributes).toEqual({
      'deployment.environment.name': 'prod',
      'service.namespace': 'jobs',
    });
    expect([config.otelTracesSampler, config.otelTracesSamplerArg]).toEqual([
      'parentbased_traceidratio',
      0.25,
    ]);
  });

  it('refuse what Baton cannot do, naming the variable', () => {
    expect(problems({ OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' })).toEqual([
      'OTEL_EXPORTER_OTLP_PROTOCOL must be one of http/json, got "grpc"',
    ]);
    expect(problems({ OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' })[0]).toMatch(
      /^OTEL_EXPORTER_OTLP_ENDPOINT must be/,
    );
    expect(problems({ OTEL_TRACES_SAMPLER_ARG: '1.5' })).toEqual([
      'OTEL_TRACES_SAMPLER_ARG must be a number from 0 to 1, got "1.5"',
    ]);
    expect(problems({ OTEL_TRACES_SAMPLER: 'sometimes' })[0]).toMatch(
      /^OTEL_TRACES_SAMPLER must be one of always_on/,
    );
    expect(problems({ OTEL_EXPORTER_OTLP_HEADERS: 'novalue' })[0]).toMatch(
      /^OTEL_EXPORTER_OTLP_HEADERS must be a list of key=value/,
    );
  });
});
