import { createInterface } from 'node:readline';
import { Worker } from '../../clients/typescript/dist/index.js';

/**
 * A worker on the TypeScript library as a user runs it (its shipped dist/, plain Node, no loader), in
 * a process of its own (bench/workers/ready-go.ts): a handler that returns null, everything else as
 * shipped (renewals, progress, the default logger). Stops on SIGTERM by the library's own handler.
 */
const worker = new Worker({
  url: process.env.BATON_URL ?? 'http://127.0.0.1:8080',
  queue: process.env.QUEUE ?? 'default',
  concurrency: Number(process.env.CONCURRENCY ?? 16),
  leaseMs: Number(process.env.LEASE_MS ?? 60_000),
  handler: () => null,
});

console.log('ready');
await new Promise((resolve) => createInterface({ input: process.stdin }).once('line', resolve));
await worker.run();
process.exit(0);
