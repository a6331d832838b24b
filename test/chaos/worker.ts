/**
 * A chaos worker process: claims in batches from random replicas with the generated client, runs
 * each job (sometimes slowly with renewals, sometimes failing, sometimes hanging past its lease),
 * acks or nacks, and writes every step to its ledger (see ledger.ts). Killed with SIGKILL at random
 * by the chaos driver; a new one takes its place.
 */
import { appendFileSync } from 'node:fs';
import { type ClaimedJob, createBatonClient } from '../../openapi/client.js';
import type { LedgerEntry } from './ledger.js';
import { Random } from './random.js';

const urls = process.env.URLS!.split(',');
const queue = process.env.QUEUE!;
const ledger = process.env.LEDGER!;
const leaseMs = Number(process.env.LEASE_MS ?? 2000);
const hangRate = Number(process.env.HANG_RATE ?? 0.005);
const slowRate = Number(process.env.SLOW_RATE ?? 0.03);
const capacity = Number(process.env.CAPACITY ?? 20);
const nackRate = Number(process.env.NACK_RATE ?? 0.05);
const random = new Random(Number(process.env.SEED ?? 1));

const clients = urls.map((baseUrl) =>
  createBatonClient({
    baseUrl,
    fetch: async (request: Request) => {
      const res = await fetch(request);
      if (res.status >= 500)
        write({ t: 'http5xx', status: res.status, path: new URL(request.url).pathname, at: Date.now() });
      return res;
    },
  }),
);
const client = () => random.pick(clients);

function write(entry: LedgerEntry) {
  appendFileSync(ledger, `${JSON.stringify(entry)}\n`);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Call until the server answers (any replica); network errors and 503s are retried. */
async function persist<T extends { response: Response }>(
  call: () => Promise<T>,
  deadline: number,
): Promise<T | undefined> {
  while (Date.now() < deadline) {
    try {
      const result = await call();
      if (result.response.status !== 503) return result;
    } catch {
      // a replica is down or restarting: try again (probably another one)
    }
    await sleep(50 + random.int(100));
  }
  return undefined;
}

async function renew(job: ClaimedJob): Promise<boolean> {
  const res = await persist(
    () =>
      client().POST('/v1/jobs/{id}/renew', {
        params: { path: { id: job.id } },
        body: { lease_token: job.lease_token },
      }),
    Date.now() + leaseMs / 3,
  );
  if (!res) return true; // could not reach anyone; the lease may still hold
  write({
    t: 'renew',
    job: job.id,
    token: job.lease_token,
    status: res.response.status,
    server_expires_at: res.data ? Date.parse(res.data.lease_expires_at) : undefined,
    at: Date.now(),
  });
  return res.response.status === 200;
}

async function run(job: ClaimedJob) {
  write({ t: 'start', job: job.id, token: job.lease_token, at: Date.now() });
  const payload = job.payload as { kind: string };
  const hang = random.chance(hangRate);
  const slow = random.chance(slowRate);
  if (hang) {
    await sleep(leaseMs * 2.5); // a stuck worker: no renewals, the lease runs out
  } else if (slow) {
    // Long work, renewing every third of the lease.
    for (let i = 0; i < 3; i++) {
      await sleep(leaseMs / 3);
      if (!(await renew(job))) {
        write({ t: 'end', job: job.id, token: job.lease_token, at: Date.now() });
        return; // lease lost: stop, do not ack
      }
    }
  } else {
    await sleep(random.int(20));
  }
  write({ t: 'end', job: job.id, token: job.lease_token, at: Date.now() });
  const path = { params: { path: { id: job.id } } };
  const deadline = Date.now() + 10 * leaseMs;
  if (payload.kind === 'poison' || random.chance(nackRate)) {
    const res = await persist(
      () =>
        client().POST('/v1/jobs/{id}/nack', {
          ...path,
          body: {
            lease_token: job.lease_token,
            error: { message: payload.kind },
            retry_in_ms: random.int(200),
          },
        }),
      deadline,
    );
    if (res) {
      write({
        t: 'nack',
        job: job.id,
        token: job.lease_token,
        status: res.response.status,
        server_at: res.data?.last_error ? Date.parse(res.data.last_error.at) : undefined,
        state: res.data?.state,
        at: Date.now(),
      });
    }
    return;
  }
  const res = await persist(
    () => client().POST('/v1/jobs/{id}/ack', { ...path, body: { lease_token: job.lease_token } }),
    deadline,
  );
  if (res)
    write({ t: 'ack', job: job.id, token: job.lease_token, status: res.response.status, at: Date.now() });
}

// Keep up to `capacity` jobs in hand; claim more as soon as there is room.
const inHand = new Set<Promise<void>>();
while (true) {
  const room = capacity - inHand.size;
  if (room === 0) {
    await Promise.race(inHand);
    continue;
  }
  let claimed: ClaimedJob[] = [];
  try {
    const { data, response } = await client().POST('/v1/queues/{queue}/claim', {
      params: { path: { queue } },
      body: { max_jobs: 1 + random.int(Math.min(room, 10)), lease_ms: leaseMs, wait_ms: 1000 },
    });
    if (response.status === 200 && data) claimed = data.jobs;
  } catch {
    await sleep(100);
    continue;
  }
  for (const job of claimed) {
    const expires = Date.parse(job.lease_expires_at);
    write({
      t: 'claim',
      job: job.id,
      attempt: job.attempt,
      token: job.lease_token,
      server_claimed_at: expires - leaseMs,
      server_expires_at: expires,
      at: Date.now(),
    });
    const running: Promise<void> = run(job).finally(() => inHand.delete(running));
    inHand.add(running);
  }
}
