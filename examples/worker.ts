/**
 * A complete Baton worker in TypeScript, on the client generated from openapi/openapi.json.
 *
 *   BATON_URL=http://127.0.0.1:8080 QUEUE=emails npm run worker
 *
 * (`npm run worker` execs Node, so a SIGTERM to npm reaches this process; `npx tsx` would not pass it on.)
 *
 * It long-polls for up to CONCURRENCY jobs at a time, runs them side by side, renews each lease
 * every third of the lease while its job runs, acks on success and nacks on failure. Each ack (or
 * nack) also claims the job that takes its place (ack-and-claim: `next` on the ack), so a busy worker
 * makes one request per job and long-polls only for slots that found nothing. On SIGTERM
 * (or SIGINT) it stops claiming at once (an unanswered long-poll is abandoned, and the server hands
 * back anything it claimed for it), lets the jobs in hand finish and report, then exits 0.
 *
 * The handler below is a stand-in: replace `handle` with your work. It may call `report(progress)`
 * (any JSON) to say how far it got: the lease's next renewal, brought forward to within a second,
 * carries the latest report (GET /v1/jobs/{id} shows it). For the demo it understands payloads like
 * {"sleep_ms": 500}, {"steps": 3, "sleep_ms": 3000} (reports {"done": n, "of": 3} after each step),
 * {"fail": "message"} and {"dead": "message"}.
 */
import { type ClaimedJob, createBatonClient } from '../openapi/client.js';

const BATON_URL = process.env.BATON_URL ?? 'http://127.0.0.1:8080';
const QUEUE = process.env.QUEUE ?? 'default';
const CONCURRENCY = Number(process.env.CONCURRENCY ?? 10);
const LEASE_MS = Number(process.env.LEASE_MS ?? 30_000);
const WORKER_ID = process.env.WORKER_ID ?? `ts-worker-${process.pid}`;
/** What Baton keeps of a progress report (renew's `progress`). */
const PROGRESS_MAX_BYTES = 4096;

const baton = createBatonClient({ baseUrl: BATON_URL });
const log = (event: string, fields: Record<string, unknown> = {}) =>
  console.log(JSON.stringify({ at: new Date().toISOString(), worker: WORKER_ID, event, ...fields }));

/** Thrown by a handler to give up on a job for good (nack with dead: true). */
class PermanentFailure extends Error {}

/** What a handler gets besides its job. */
interface JobContext {
  /** Aborts when the lease is lost (someone else may now run the job). */
  signal: AbortSignal;
  /** How far the job got (any JSON): sent with the lease's next renewal, within a second; latest wins. */
  report: (progress: unknown) => void;
}

/** Your work goes here. */
async function handle(job: ClaimedJob, { signal, report }: JobContext): Promise<unknown> {
  const payload = (job.payload ?? {}) as { sleep_ms?: number; steps?: number; fail?: string; dead?: string };
  const sleep = (ms: number) =>
    new Promise<void>((resolve, reject) => {
      const timer = setTimeout(resolve, ms);
      signal.addEventListener('abort', () => {
        clearTimeout(timer);
        reject(new Error('lease lost'));
      });
    });
  const steps = payload.steps ?? 0;
  for (let done = 1; done <= steps; done++) {
    await sleep((payload.sleep_ms ?? 0) / steps);
    report({ done, of: steps });
  }
  if (payload.sleep_ms && !steps) await sleep(payload.sleep_ms);
  if (payload.dead) throw new PermanentFailure(payload.dead);
  if (payload.fail) throw new Error(payload.fail);
  return { handled_by: WORKER_ID };
}

let stopping = false;

/**
 * `next` for an ack or nack: one job to take this one's place, without waiting (the claim loop below
 * long-polls for slots that find nothing). None while stopping: claim nothing more.
 */
const nextClaim = () =>
  stopping ? undefined : { max_jobs: 1, lease_ms: LEASE_MS, wait_ms: 0, worker_id: WORKER_ID };

/** One slot: run a job, then the one its ack claimed in its place, and so on. */
async function slot(first: ClaimedJob): Promise<void> {
  let job: ClaimedJob | undefined = first;
  while (job) job = await work(job);
}

/**
 * Run one job under its lease: renew on a timer, then ack or nack. Answers the job the ack or nack
 * claimed in its place, if any (even while stopping: it is ours then, so it is worked too).
 */
async function work(job: ClaimedJob): Promise<ClaimedJob | undefined> {
  const path = { params: { path: { id: job.id } } };
  const lost = new AbortController();
  const renewEvery = Math.max(1000, Math.floor(LEASE_MS / 3));
  // The latest report not yet sent, and the renewal a report brought forward.
  let unsent: { progress: unknown } | undefined;
  let soon: NodeJS.Timeout | undefined;
  const renew = async () => {
    const sending = unsent;
    unsent = undefined;
    const { error } = await baton.POST('/v1/jobs/{id}/renew', {
      ...path,
      body: { lease_token: job.lease_token, ...(sending ? { progress: sending.progress } : {}) },
    });
    if (error?.code === 'validation_failed' || error?.code === 'payload_too_large') {
      // A report Baton would not keep must not cost the lease: drop it and renew without it.
      if (sending) {
        log('progress_refused', { id: job.id, detail: error.detail });
        return renew();
      }
    } else if (error && sending && !unsent) unsent = sending; // the next renewal tries it again
    if (error?.code === 'lease_lost' || error?.code === 'not_found') {
      log('lease_lost', { id: job.id });
      lost.abort();
    }
  };
  const renewer = setInterval(renew, renewEvery);
  const report = (progress: unknown) => {
    // A report that cannot be sent fails here, in the handler, not in every renewal of the lease.
    const bytes = Buffer.byteLength(JSON.stringify(progress ?? null));
    if (bytes > PROGRESS_MAX_BYTES)
      throw new Error(`progress is ${bytes} bytes of JSON; Baton keeps at most ${PROGRESS_MAX_BYTES}`);
    unsent = { progress };
    soon ??= setTimeout(() => {
      soon = undefined;
      void renew();
    }, 1000);
  };
  try {
    const result = await handle(job, { signal: lost.signal, report });
    if (lost.signal.aborted) return undefined;
    const { data, error } = await baton.POST('/v1/jobs/{id}/ack', {
      ...path,
      body: { lease_token: job.lease_token, result, next: nextClaim() },
    });
    log(error ? 'ack_refused' : 'acked', { id: job.id, attempt: job.attempt, code: error?.code });
    return following(data?.next);
  } catch (err) {
    if (lost.signal.aborted) return undefined;
    const message = (err as Error).message || String(err);
    const { data, error } = await baton.POST('/v1/jobs/{id}/nack', {
      ...path,
      body: {
        lease_token: job.lease_token,
        error: { message, details: { stack: (err as Error).stack?.split('\n').slice(0, 5) } },
        dead: err instanceof PermanentFailure,
        next: nextClaim(),
      },
    });
    log(error ? 'nack_refused' : 'nacked', {
      id: job.id,
      attempt: job.attempt,
      state: data?.state,
      code: error?.code,
    });
    return following(data?.next);
  } finally {
    clearInterval(renewer);
    clearTimeout(soon);
  }
}

/** The job an ack or nack claimed (next asks for one at most). */
function following(next: ClaimedJob[] | undefined): ClaimedJob | undefined {
  const job = next?.[0];
  if (job) log('claimed', { id: job.id, attempt: job.attempt, by: 'ack' });
  return job;
}

const claiming = new AbortController();
const inFlight = new Set<Promise<void>>();

function stop(signal: string) {
  if (stopping) return;
  stopping = true;
  log('stopping', { signal, in_flight: inFlight.size });
  claiming.abort();
}
process.on('SIGTERM', () => stop('SIGTERM'));
process.on('SIGINT', () => stop('SIGINT'));

log('started', { baton: BATON_URL, queue: QUEUE, concurrency: CONCURRENCY, lease_ms: LEASE_MS });
while (!stopping) {
  const room = CONCURRENCY - inFlight.size;
  if (room === 0) {
    await Promise.race(inFlight);
    continue;
  }
  const { data, error } = await baton
    .POST('/v1/queues/{queue}/claim', {
      params: { path: { queue: QUEUE } },
      body: { max_jobs: room, lease_ms: LEASE_MS, wait_ms: 20_000, worker_id: WORKER_ID },
      signal: claiming.signal,
    })
    .catch((err: Error) => ({ data: undefined, error: { code: err.name, detail: err.message } }));
  if (stopping) break;
  if (error || !data) {
    log('claim_failed', { code: error?.code, detail: error?.detail });
    await new Promise((r) => setTimeout(r, 1000));
    continue;
  }
  for (const job of data.jobs) {
    log('claimed', { id: job.id, attempt: job.attempt });
    const running: Promise<void> = slot(job).finally(() => inFlight.delete(running));
    inFlight.add(running);
  }
}
await Promise.all(inFlight);
log('drained');
