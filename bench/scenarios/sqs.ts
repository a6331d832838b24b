import http from 'node:http';
import {
  CreateQueueCommand,
  DeleteMessageBatchCommand,
  ReceiveMessageCommand,
  SendMessageBatchCommand,
  SQSClient,
} from '@aws-sdk/client-sqs';
import { sha256 } from '../../src/auth/api-keys.js';
import { BATON_PORT, type BenchContext } from '../context.js';
import { CpuMeter, type CpuUsage } from '../cpu-split.js';
import { adminPool, DATABASES } from '../databases.js';
import { HttpClient } from '../load/http-client.js';
import { produceInBatches } from '../load/produce.js';
import type { Check, Metric, ScenarioResult } from '../report.js';
import { fmt, median } from '../stats.js';

/**
 * What the SQS layer costs. One Baton server (API keys on, as in production: the native
 * API with a bearer key, the SQS endpoint with Signature V4) serves both in the same run, rounds
 * interleaved. Each run is a full cycle of N jobs in batches of 10, SQS's largest:
 * - SQS: producers call SendMessageBatch (10 entries); workers call ReceiveMessage
 *   (MaxNumberOfMessages 10, WaitTimeSeconds 1) then DeleteMessageBatch (10), all with the AWS SDK
 *   for JavaScript v3 (@aws-sdk/client-sqs, default settings: it signs every request and checks
 *   MD5OfMessageBody on sends and receives);
 * - native: POST /v1/queues/{q}/jobs/batch (10 jobs), claim max_jobs 10 (wait_ms 1000), then
 *   POST /v1/jobs/ack (10), with the bench's plain JSON client.
 * Jobs/s from the first send to the last delete; CPU of the server, the load generator (this
 * process: the SDK, or the plain client) and the PostgreSQL backends.
 */

const BATCH = 10;
const SQS = 'SQS API (AWS SDK v3)';
const NATIVE = 'native batch API';
const PORT = BATON_PORT + 19;
const BEARER = 'bench-sqs-bearer-key';
const PAIR = { accessKeyId: 'AKIABENCH', secretAccessKey: 'bench-secret-access-key-0123456789' };

type Kind = 'flat' | 'paced';

interface Run {
  jobsPerSecond: number;
  jobs: number;
  cpu: CpuUsage;
}

/** A full cycle of `total` jobs; `rate` (jobs/s) paces the producers, else they send flat out. */
type Load = (queue: string, total: number, rate?: number) => Promise<number>;

/** Producers: flat out, or one batch every BATCH/rate seconds across all of them. */
function produce(
  ctx: BenchContext,
  total: number,
  rate: number | undefined,
  send: (start: number, n: number) => Promise<void>,
) {
  if (rate === undefined) return produceInBatches(total, BATCH, ctx.sizes.sqsProducers, send);
  const t0 = performance.now();
  const interval = (1000 * BATCH) / rate;
  let next = 0;
  return Promise.all(
    Array.from({ length: ctx.sizes.sqsProducers }, async () => {
      while (next * BATCH < total) {
        const k = next++;
        const wait = t0 + k * interval - performance.now();
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
        await send(k * BATCH, Math.min(BATCH, total - k * BATCH));
      }
    }),
  ).then(() => undefined);
}

function expectOk(ok: boolean, what: string, detail: unknown): void {
  if (!ok) throw new Error(`${what}: ${JSON.stringify(detail).slice(0, 300)}`);
}

/** The SQS full cycle; resolves with the time of the last delete. */
function sqsLoad(ctx: BenchContext, client: SQSClient, baseUrl: string): Load {
  return async (queue, total, rate) => {
    const { QueueUrl } = await client.send(new CreateQueueCommand({ QueueName: queue }));
    expectOk(QueueUrl === `${baseUrl}/000000000000/${queue}`, 'CreateQueue', QueueUrl);
    let deleted = 0;
    let lastDelete = 0;
    const producing = produce(ctx, total, rate, async (start, n) => {
      const out = await client.send(
        new SendMessageBatchCommand({
          QueueUrl,
          Entries: Array.from({ length: n }, (_, k) => ({
            Id: `e${k}`,
            MessageBody: JSON.stringify({ i: start + k }),
          })),
        }),
      );
      expectOk((out.Failed ?? []).length === 0, 'SendMessageBatch', out.Failed);
    });
    const working = Promise.all(
      Array.from({ length: ctx.sizes.sqsWorkers }, async () => {
        while (deleted < total) {
          const { Messages = [] } = await client.send(
            new ReceiveMessageCommand({
              QueueUrl,
              MaxNumberOfMessages: BATCH,
              VisibilityTimeout: 60,
              WaitTimeSeconds: 1,
            }),
          );
          if (Messages.length === 0) continue;
          const out = await client.send(
            new DeleteMessageBatchCommand({
              QueueUrl,
              Entries: Messages.map((m, k) => ({ Id: `d${k}`, ReceiptHandle: m.ReceiptHandle! })),
            }),
          );
          expectOk((out.Failed ?? []).length === 0, 'DeleteMessageBatch', out.Failed);
          deleted += Messages.length;
          lastDelete = performance.now();
        }
      }),
    );
    await Promise.all([producing, working]);
    return lastDelete;
  };
}

/** The same cycle on Baton's own API. */
function nativeLoad(ctx: BenchContext, client: HttpClient): Load {
  return async (queue, total, rate) => {
    let acked = 0;
    let lastAck = 0;
    const producing = produce(ctx, total, rate, async (start, n) => {
      const jobs = Array.from({ length: n }, (_, k) => ({ payload: { i: start + k } }));
      const r = await client.post(`/v1/queues/${queue}/jobs/batch`, { jobs });
      expectOk(r.status === 201, 'batch enqueue', r.body);
    });
    const working = Promise.all(
      Array.from({ length: ctx.sizes.sqsWorkers }, async () => {
        while (acked < total) {
          const claim = await client.post(`/v1/queues/${queue}/claim`, {
            max_jobs: BATCH,
            lease_ms: 60_000,
            wait_ms: 1000,
          });
          expectOk(claim.status === 200, 'claim', claim.body);
          const jobs: { id: string; lease_token: string }[] = claim.body.jobs;
          if (jobs.length === 0) continue;
          const r = await client.post('/v1/jobs/ack', {
            acks: jobs.map((j) => ({ id: j.id, lease_token: j.lease_token })),
          });
          expectOk(r.status === 200 && r.body.failed === 0, 'batch ack', r.body);
          acked += jobs.length;
          lastAck = performance.now();
        }
      }),
    );
    await Promise.all([producing, working]);
    return lastAck;
  };
}

export async function sqsVersusNative(ctx: BenchContext): Promise<ScenarioResult> {
  const server = await ctx.extraBaton(PORT, {
    BATON_MAINTENANCE: 'false',
    BATON_API_KEYS: JSON.stringify([
      { name: 'bench', sha256: sha256(BEARER).toString('hex'), scopes: ['admin'] },
    ]),
    BATON_SQS_CREDENTIALS: JSON.stringify([
      { access_key_id: PAIR.accessKeyId, secret_access_key: PAIR.secretAccessKey, api_key: 'bench' },
    ]),
  });
  const admin = adminPool(DATABASES.baton);
  const native = new HttpClient(server.url, 64, { authorization: `Bearer ${BEARER}` });
  const sqs = new SQSClient({
    endpoint: server.url,
    region: 'us-east-1',
    credentials: PAIR,
    requestHandler: { httpAgent: new http.Agent({ keepAlive: true, maxSockets: 64 }) },
  });
  const loads: Record<string, Load> = {
    [SQS]: sqsLoad(ctx, sqs, server.url),
    [NATIVE]: nativeLoad(ctx, native),
  };
  const runs: Record<Kind, Record<string, Run[]>> = {
    flat: { [SQS]: [], [NATIVE]: [] },
    paced: { [SQS]: [], [NATIVE]: [] },
  };
  const n = ctx.sizes.sqsJobs;
  const paced = Math.max(500, Math.round(n / 4));
  const rate = ctx.sizes.sqsPacedRate;
  try {
    // One untimed warm-up per system: connections, prepared statements, JIT.
    for (const [system, load] of Object.entries(loads)) {
      await load(`sqs-bench-warm-${system === SQS ? 'sqs' : 'native'}`, Math.max(500, n / 10));
    }
    await admin.query('VACUUM ANALYZE');
    for (let round = 0; round < ctx.sizes.rounds; round++) {
      for (const kind of ['flat', 'paced'] as Kind[]) {
        for (const system of ctx.order(round, [NATIVE, SQS])) {
          const queue = `sqs-bench-${kind}-${system === SQS ? 'sqs' : 'native'}-${round}`;
          const jobs = kind === 'flat' ? n : paced;
          const meter = new CpuMeter(admin, DATABASES.baton, () => server.cpuMs());
          await meter.start();
          const t0 = performance.now();
          const end = await loads[system]!(queue, jobs, kind === 'paced' ? rate : undefined);
          const cpu = await meter.stop();
          const run = { jobsPerSecond: jobs / ((end - t0) / 1000), jobs, cpu };
          runs[kind][system]!.push(run);
          ctx.log(`  sqs ${kind} round ${round + 1}: ${system} ${Math.round(run.jobsPerSecond)} jobs/s`);
          await admin.query('VACUUM ANALYZE baton.jobs');
        }
      }
    }
  } finally {
    sqs.destroy();
    native.close();
    await admin.end();
    await ctx.stopExtra(server);
  }

  const metric = (
    kind: Kind,
    id: string,
    title: string,
    unit: string,
    better: 'higher' | 'lower',
    pick: (r: Run) => number,
  ): Metric => ({
    id: `sqs.${kind}.${id}`,
    title: `${title} (${kind === 'flat' ? 'flat out' : `paced at ${rate} jobs/s`})`,
    unit,
    better,
    ratios: false,
    series: { [SQS]: runs[kind][SQS]!.map(pick), [NATIVE]: runs[kind][NATIVE]!.map(pick) },
  });
  const perThousand = (ms: number, r: Run) => (ms / r.jobs) * 1000;
  const cpuMetrics = (kind: Kind) => [
    metric(kind, 'server-cpu', 'Baton server CPU', 'CPU ms per 1,000 jobs', 'lower', (r) =>
      perThousand(r.cpu.server, r),
    ),
    metric(
      kind,
      'client-cpu',
      'Client CPU (the AWS SDK, or the plain JSON client)',
      'CPU ms per 1,000 jobs',
      'lower',
      (r) => perThousand(r.cpu.bench, r),
    ),
    metric(kind, 'postgres-cpu', 'PostgreSQL backend CPU', 'CPU ms per 1,000 jobs', 'lower', (r) =>
      perThousand(r.cpu.postgres, r),
    ),
  ];
  const throughput = metric(
    'flat',
    'throughput',
    'Full cycle in batches of 10',
    'jobs/s',
    'higher',
    (r) => r.jobsPerSecond,
  );
  const [flatServer, ...flatRest] = cpuMetrics('flat');
  const [pacedServer, ...pacedRest] = cpuMetrics('paced');

  /**
   * SQS / native per round (each round runs the two back to back, so drift on this shared machine
   * cancels out within a pair): the median of those, which the checks use, and the ratio of medians.
   */
  const ratio = (m: Metric) => {
    const perRound = m.series[SQS]!.map((v, i) => v / m.series[NATIVE]![i]!);
    return {
      perRound,
      paired: median(perRound),
      medians: median(m.series[SQS]!) / median(m.series[NATIVE]!),
    };
  };
  const shown = (r: ReturnType<typeof ratio>) =>
    `SQS/native ${fmt(r.paired, 3)}× (median of the rounds: ${r.perRound.map((x) => fmt(x, 3)).join(', ')}; ` +
    `ratio of the medians ${fmt(r.medians, 3)}×)`;
  const t = ratio(throughput);
  const s = ratio(pacedServer!);
  const f = ratio(flatServer!);
  const checks: Check[] = [
    {
      target:
        'Baton server CPU per job through SQS ≤ 1.25× the native API’s, at equal load (the cost of the SQS layer)',
      met: s.paired <= 1.25,
      detail: shown(s),
    },
    {
      target: 'the same, flat out (each API as fast as its client drives it)',
      met: f.paired <= 1.25,
      detail: shown(f),
    },
    {
      target:
        'flat-out throughput with the AWS SDK as the client ≥ 80% of the native API’s (SDK client cost included)',
      met: t.paired >= 0.8,
      detail: shown(t),
    },
  ];
  const sizes = ctx.sizes;
  return {
    id: 'sqs',
    title: 'The SQS layer against the native batch API',
    setup: [
      `${n.toLocaleString('en-US')} jobs per flat-out run (producers send as fast as they can) and ${paced.toLocaleString('en-US')} per paced run (producers send ${rate} jobs/s in all, below what either API handles here, so both run at the same load and batch alike), ${sizes.rounds} rounds, the two APIs interleaved (order reversed every other round), after one untimed warm-up each.`,
      `One Baton server (dist/, maintenance off) with an API key and its SQS key pair; ${sizes.sqsProducers} producers and ${sizes.sqsWorkers} workers in the bench process.`,
      `SQS: SendMessageBatch (10) → ReceiveMessage (MaxNumberOfMessages 10, WaitTimeSeconds 1, VisibilityTimeout 60) → DeleteMessageBatch (10) with @aws-sdk/client-sqs at its defaults (SigV4 signing, MD5 checks), keep-alive agent of 64 sockets.`,
      `Native: POST /v1/queues/{q}/jobs/batch (10) → POST /v1/queues/{q}/claim (max_jobs 10, wait_ms 1000) → POST /v1/jobs/ack (10), Authorization: Bearer, the bench's node:http JSON client.`,
    ],
    metrics: [throughput, flatServer!, ...flatRest, pacedServer!, ...pacedRest],
    checks,
    details: { runs },
  };
}
