/**
 * Producers: `concurrency` callers share `total` jobs, taking `batchSize` at a time (the last batch
 * may be smaller), and call `send(start, n)` for each batch. Every system's enqueue uses this loop,
 * so Baton and the peers are driven the same way.
 */
export async function produceInBatches(
  total: number,
  batchSize: number,
  concurrency: number,
  send: (start: number, n: number) => Promise<void>,
): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < total) {
        const start = next;
        const n = Math.min(batchSize, total - start);
        next += n;
        await send(start, n);
      }
    }),
  );
}
