import { createInterface } from 'node:readline';
import { HttpClient } from '../load/http-client.js';

/**
 * The bench's own hand-written worker loop, in a process of its own (bench/workers/ready-go.ts):
 * CONCURRENCY slots, each claims one job, then acks it with `next` for one more (ack-and-claim, one
 * request per job), over node:http keep-alive sockets; a slot whose ack brought nothing claims with a
 * long-poll. No leases renewed, no handler, no logging: the floor a worker library is measured against.
 */
const url = process.env.BATON_URL ?? 'http://127.0.0.1:8080';
const queue = encodeURIComponent(process.env.QUEUE ?? 'default');
const concurrency = Number(process.env.CONCURRENCY ?? 16);
// With LOOP_WORKER_ID, its claims name the worker (worker_id), as the libraries' do.
const named = process.env.LOOP_WORKER_ID ? { worker_id: process.env.LOOP_WORKER_ID } : {};
const claim = { max_jobs: 1, lease_ms: 60_000, wait_ms: 1000, ...named };
const next = { ...claim, wait_ms: 0 };
const client = new HttpClient(url, concurrency);
let stopping = false;
process.on('SIGTERM', () => {
  stopping = true;
});

async function slot(): Promise<void> {
  let hand: { id: string; lease_token: string }[] = [];
  while (!stopping) {
    if (hand.length === 0) {
      const r = await client.post(`/v1/queues/${queue}/claim`, claim);
      if (r.status !== 200) throw new Error(`claim: HTTP ${r.status}`);
      hand = r.body.jobs;
      continue;
    }
    const job = hand[0]!;
    const r = await client.post(`/v1/jobs/${job.id}/ack`, {
      lease_token: job.lease_token,
      result: null,
      next,
    });
    if (r.status !== 200) throw new Error(`ack: HTTP ${r.status}`);
    hand = r.body.next;
  }
}

console.log('ready');
await new Promise<void>((resolve) => createInterface({ input: process.stdin }).once('line', () => resolve()));
await Promise.all(Array.from({ length: concurrency }, slot));
client.close();
process.exit(0);
