/**
 * A job's life through the client @hey-api/openapi-ts generates from Baton's document, compiled by
 * tsc together with that client (so every call below must also fit the generated types). Successful
 * calls throw on any error, including a 2xx answer that does not match the document; the expected
 * 409 and 404 come back as problem details, checked against the document's Problem schema here
 * (the generated SDK checks only 2xx answers).
 */
import { createClient, createConfig } from './client/client/index.js';
import {
  ackJob,
  ackJobs,
  claimJobs,
  enqueueJob,
  enqueueJobs,
  getHealth,
  getJob,
  getQueue,
  type Job,
  listJobs,
  nackJob,
  type Problem,
  renewLease,
} from './client/index.js';
import { zProblem } from './client/zod.gen.js';

export interface Drive {
  enqueued: { status: number; state: string };
  batch: boolean[];
  claimed: { id: string; attempt: number; lease_token: string }[];
  renewed: { lease_ms: number };
  acked: Job;
  nacked: Job;
  read: Job;
  batchAck: string[];
  listed: string[];
  queue: { ready: number; lease_ms: number };
  health: string;
  conflict: { status: number; problem: Problem };
  missing: { status: number; problem: Problem };
  refusedBeforeSending: string;
  refusedAnswer: string;
  ackAndClaim: { state: string; next: unknown[] };
}

export async function drive(baseUrl: string, apiKey: string, queue: string): Promise<Drive> {
  const client = createClient(createConfig({ baseUrl, auth: () => apiKey }));
  const on = { client, throwOnError: true as const };
  const path = { queue };

  const one = await enqueueJob({ ...on, path, body: { payload: { to: 'ada@example.com' }, priority: 5 } });
  const batch = await enqueueJobs({
    ...on,
    path,
    body: { jobs: [{ payload: { n: 2 } }, { payload: { n: 3 }, idempotency_key: 'n3' }] },
  });

  const claim = await claimJobs({
    ...on,
    path,
    body: { max_jobs: 3, lease_ms: 30_000, wait_ms: 1000, worker_id: 'hey-api' },
  });
  const [first, second, third] = claim.data.jobs;
  if (!first || !second || !third) throw new Error(`claimed ${claim.data.jobs.length} jobs, not 3`);

  const renewed = await renewLease({
    ...on,
    path: { id: first.id },
    body: { lease_token: first.lease_token },
  });
  const acked = await ackJob({
    ...on,
    path: { id: first.id },
    body: { lease_token: first.lease_token, result: { sent: true } },
  });
  const nacked = await nackJob({
    ...on,
    path: { id: second.id },
    body: { lease_token: second.lease_token, error: { message: 'smtp timeout' }, retry_in_ms: 60_000 },
  });
  const read = await getJob({ ...on, path: { id: second.id } });
  const batchAck = await ackJobs({
    ...on,
    body: { acks: [{ id: third.id, lease_token: third.lease_token }] },
  });
  const listed = await listJobs({ ...on, path, query: { state: 'completed', include_payload: true } });
  const settings = await getQueue({ ...on, path });
  const health = await getHealth({ ...on });

  // The nacked job's lease is gone: acking it again is 409 lease_lost. A job that never was: 404.
  const stale = await ackJob({ client, path: { id: second.id }, body: { lease_token: second.lease_token } });
  const none = await getJob({ client, path: { id: '999999999' } });

  // The validators are on: a lease shorter than the document allows never leaves the client, and an
  // answer that strays from the document (here, one the test corrupts on its way in) is refused.
  const tooShort = await claimJobs({ client, path, body: { lease_ms: 5 } });
  const corrupting = createClient(
    createConfig({
      baseUrl,
      auth: () => apiKey,
      fetch: async (request) => {
        const response = await fetch(request);
        const body = { ...((await response.json()) as object), state: 'lost' };
        const headers = new Headers(response.headers);
        headers.delete('content-length');
        return new Response(JSON.stringify(body), { status: response.status, headers });
      },
    }),
  );
  const corrupted = await getJob({ client: corrupting, path: { id: first.id } });

  // Ack-and-claim: an ack with next answers the queue's next job too (checked against JobAndNext).
  await enqueueJobs({ ...on, path, body: { jobs: [{ payload: { n: 4 } }, { payload: { n: 5 } }] } });
  const [fourth] = (await claimJobs({ ...on, path, body: { max_jobs: 1 } })).data.jobs;
  if (!fourth) throw new Error('claimed no fourth job');
  const ackAndClaim = await ackJob({
    ...on,
    path: { id: fourth.id },
    body: { lease_token: fourth.lease_token, next: { max_jobs: 2, lease_ms: 30_000 } },
  });

  return {
    enqueued: { status: one.response.status, state: one.data.state },
    batch: batch.data.jobs.map((job) => job.created),
    claimed: claim.data.jobs.map(({ id, attempt, lease_token }) => ({ id, attempt, lease_token })),
    renewed: { lease_ms: renewed.data.lease_ms },
    acked: acked.data,
    nacked: nacked.data,
    read: read.data,
    batchAck: batchAck.data.results.map((r) => r.outcome),
    listed: listed.data.jobs.map((job) => job.id),
    queue: { ready: settings.data.stats.ready, lease_ms: settings.data.lease_ms },
    health: health.data.status,
    conflict: { status: stale.response?.status ?? 0, problem: zProblem.parse(stale.error) },
    missing: { status: none.response?.status ?? 0, problem: zProblem.parse(none.error) },
    refusedBeforeSending: tooShort.response ? 'sent' : describe(tooShort.error),
    refusedAnswer: describe(corrupted.error),
    ackAndClaim: {
      state: ackAndClaim.data.state,
      next: (ackAndClaim.data.next ?? []).map((job) => job.payload),
    },
  };
}

/** What a refused call's error is: a ZodError's name and first issue, or whatever came back. */
function describe(error: unknown): string {
  const issue = (error as { issues?: { path: PropertyKey[] }[] })?.issues?.[0];
  if (error instanceof Error && issue) return `${error.name} at ${issue.path.join('.')}`;
  return JSON.stringify(error);
}
