import type { BatonApp } from '../../src/app.js';

/** Thin helpers over app.inject for the job lifecycle routes; they return status and parsed body. */
export interface Reply<T = any> {
  status: number;
  body: T;
  headers: Record<string, unknown>;
}

export function api(app: BatonApp) {
  const call = async <T = any>(
    method: 'GET' | 'POST' | 'PUT' | 'DELETE',
    url: string,
    payload?: unknown,
  ): Promise<Reply<T>> => {
    const res = await app.inject({
      method,
      url,
      ...(payload === undefined ? {} : { payload: payload as object }),
    });
    return { status: res.statusCode, body: (res.body ? res.json() : undefined) as T, headers: res.headers };
  };
  return {
    call,
    enqueue: (queue: string, body: object) => call('POST', `/v1/queues/${queue}/jobs`, body),
    enqueueBatch: (queue: string, jobs: object[]) => call('POST', `/v1/queues/${queue}/jobs/batch`, { jobs }),
    claim: (queue: string, body: object = {}) => call('POST', `/v1/queues/${queue}/claim`, body),
    renew: (id: string, body: object) => call('POST', `/v1/jobs/${id}/renew`, body),
    renewBatch: (renewals: object[]) => call('POST', '/v1/jobs/renew', { renewals }),
    ack: (id: string, body: object) => call('POST', `/v1/jobs/${id}/ack`, body),
    ackBatch: (acks: object[]) => call('POST', '/v1/jobs/ack', { acks }),
    nack: (id: string, body: object) => call('POST', `/v1/jobs/${id}/nack`, body),
    cancel: (id: string) => call('POST', `/v1/jobs/${id}/cancel`),
    get: (id: string) => call('GET', `/v1/jobs/${id}`),
  };
}

/** Enqueue one job and claim it; returns the claimed job (with its lease token). */
export async function enqueueAndClaim(
  app: BatonApp,
  queue: string,
  enqueueBody: object = { payload: {} },
  claimBody: object = {},
) {
  const client = api(app);
  const enq = await client.enqueue(queue, enqueueBody);
  if (enq.status !== 201) throw new Error(`enqueue failed: ${JSON.stringify(enq.body)}`);
  const claimed = await client.claim(queue, claimBody);
  const job = claimed.body.jobs.find((j: { id: string }) => j.id === enq.body.id);
  if (!job) throw new Error(`claim did not return job ${enq.body.id}`);
  return job as { id: string; lease_token: string; attempt: number; lease_expires_at: string; queue: string };
}

/** Enqueue `n` jobs (payloads 0 to n-1) and claim them all at once; returns the claimed jobs. */
export async function enqueueAndClaimMany(
  app: BatonApp,
  queue: string,
  n: number,
  claimBody: object = {},
): Promise<any[]> {
  const client = api(app);
  const enq = await client.enqueueBatch(
    queue,
    Array.from({ length: n }, (_, i) => ({ payload: i })),
  );
  if (enq.status !== 201) throw new Error(`enqueue failed: ${JSON.stringify(enq.body)}`);
  const claimed = await client.claim(queue, { ...claimBody, max_jobs: n });
  if (claimed.body.jobs?.length !== n) throw new Error(`claimed ${claimed.body.jobs?.length} of ${n} jobs`);
  return claimed.body.jobs;
}
