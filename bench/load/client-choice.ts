import { BatonServer } from '../baton-server.js';
import { DATABASES, databaseUrl } from '../databases.js';
import { selfCpuMs } from '../process-usage.js';
import { median } from '../stats.js';
import { FetchClient, HttpClient, type JsonResponse } from './http-client.js';

/**
 * Which HTTP client the load generator uses: node:http with a keep-alive agent, or the global fetch
 * (undici). Both drive the same server with the same requests (16 concurrent single-job enqueues,
 * then 8 workers claiming 100 and batch-acking), interleaved over 3 rounds; the figure that matters
 * on a two-core machine is the client's own CPU per request, since every millisecond the load
 * generator spends is taken from the server and PostgreSQL.
 *   npx tsx bench/load/client-choice.ts   (after npm run build; uses the baton_bench database)
 */

interface Client {
  post(path: string, body: unknown): Promise<JsonResponse>;
  close(): void;
}

async function drive(
  client: Client,
  queue: string,
): Promise<{ requests: number; cpuMs: number; ms: number }> {
  const cpu0 = selfCpuMs();
  const t0 = performance.now();
  let requests = 0;
  let next = 0;
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      while (next++ < 3_000) {
        await client.post(`/v1/queues/${queue}/jobs`, { payload: { next } });
        requests++;
      }
    }),
  );
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      while (true) {
        const r = await client.post(`/v1/queues/${queue}/claim`, { max_jobs: 100 });
        requests++;
        if (r.body.jobs.length === 0) return;
        await client.post('/v1/jobs/ack', {
          acks: r.body.jobs.map((j: { id: string; lease_token: string }) => ({
            id: j.id,
            lease_token: j.lease_token,
          })),
        });
        requests++;
      }
    }),
  );
  return { requests, cpuMs: selfCpuMs() - cpu0, ms: performance.now() - t0 };
}

async function main() {
  const server = new BatonServer({
    databaseUrl: databaseUrl(DATABASES.baton),
    port: 18_491,
    env: { BATON_MAINTENANCE: 'false' },
  });
  await server.start();
  const results: Record<string, { usPerRequest: number[]; requestsPerSecond: number[] }> = {
    'node:http + keep-alive Agent': { usPerRequest: [], requestsPerSecond: [] },
    'global fetch (undici)': { usPerRequest: [], requestsPerSecond: [] },
  };
  try {
    for (let round = 0; round < 3; round++) {
      for (const name of round % 2 ? Object.keys(results).reverse() : Object.keys(results)) {
        const client: Client = name.startsWith('node:http')
          ? new HttpClient(server.url)
          : new FetchClient(server.url);
        const r = await drive(client, `client-${round}-${name.length}`);
        client.close();
        results[name]!.usPerRequest.push((r.cpuMs / r.requests) * 1000);
        results[name]!.requestsPerSecond.push(r.requests / (r.ms / 1000));
      }
    }
  } finally {
    await server.stop();
  }
  for (const [name, r] of Object.entries(results)) {
    console.log(
      `${name}: client CPU ${Math.round(median(r.usPerRequest))} µs/request (${r.usPerRequest.map(Math.round).join(', ')}), ${Math.round(median(r.requestsPerSecond))} requests/s`,
    );
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
