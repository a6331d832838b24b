import { Session } from 'node:inspector/promises';
import { getHeapStatistics } from 'node:v8';

/**
 * Gives memory back to the system once the server has gone idle after a burst of work.
 *
 * Under load V8 sizes the young generation by the allocation rate (up to two 64 MiB semi-spaces
 * on Node 24) and lets the old generation grow to a multiple of what is live, which is what keeps
 * a busy server fast; but an idle server keeps that heap (three times what a full GC leaves:
 * docs/benchmarks.md, "What was tried and what it gave", rows "V8 flags" and "Idle memory release"),
 * because only a memory-reducing GC shrinks the young generation and returns free pages, and Node never
 * asks for one. Smaller young generations (V8 flags) cost CPU on every request; this costs one GC
 * when there is nothing else to do, and the next burst starts on a small heap, paying the regrowth
 * (the same row).
 * Hence a default idle time of a minute (BATON_IDLE_MEMORY_RELEASE_MS): bursts closer together than that
 * keep their heap.
 *
 * Idle means the process used under IDLE_CPU_SHARE of a core in every tick of the idle period; the
 * heap must have grown by GROWTH_BYTES since the last release, so an idle server collects once, not
 * on every tick.
 */

/** CPU share (of one core) under which a tick counts as idle: the leader's duties stay below it. */
export const IDLE_CPU_SHARE = 0.05;
/** Heap growth since the last release that makes another one worth it. */
export const GROWTH_BYTES = 32 * 2 ** 20;

export interface Sample {
  /** Wall-clock time, ms. */
  atMs: number;
  /** CPU time of the process so far (user + system), ms. */
  cpuMs: number;
  /** V8's committed heap (total_heap_size), bytes. */
  heapBytes: number;
}

/** The decision, apart from the clock and the GC so that it can be tested exactly. */
export class IdleTracker {
  private last: Sample | undefined;
  private idleSinceMs: number | undefined;
  // 0 at first: start-up leaves garbage too (RSS idle well above what a full GC leaves), so the
  // first idle period releases it.
  private heapAfterRelease = 0;

  constructor(private readonly idleMs: number) {}

  /** Feed a sample; true when the memory should be released now. */
  observe(sample: Sample): boolean {
    const last = this.last;
    this.last = sample;
    if (!last) return false;
    const elapsed = sample.atMs - last.atMs;
    const busy = elapsed <= 0 || sample.cpuMs - last.cpuMs > elapsed * IDLE_CPU_SHARE;
    if (busy) {
      this.idleSinceMs = undefined;
      return false;
    }
    this.idleSinceMs ??= last.atMs;
    return (
      sample.atMs - this.idleSinceMs >= this.idleMs && sample.heapBytes > this.heapAfterRelease + GROWTH_BYTES
    );
  }

  /** The heap right after a release: the size the next one is measured against. */
  released(heapBytes: number): void {
    this.heapAfterRelease = heapBytes;
  }
}

/**
 * A full, memory-reducing GC (the one DevTools' "collect garbage" runs: V8 shrinks the young
 * generation and unmaps free pages), through an in-process inspector session, the public API that
 * reaches it without --expose-gc. Returns the committed heap afterwards.
 */
export async function releaseMemory(): Promise<number> {
  const session = new Session();
  session.connect();
  try {
    await session.post('HeapProfiler.collectGarbage');
  } finally {
    session.disconnect();
  }
  return getHeapStatistics().total_heap_size;
}

export interface IdleReleaseOptions {
  idleMs: number;
  /** Called after each release with the heap before and after, bytes, and how long it took. */
  onRelease?: (info: { heapBefore: number; heapAfter: number; ms: number }) => void;
  onError?: (err: unknown) => void;
}

/** Starts watching (an unref'd timer); the returned function stops it. */
export function startIdleRelease(opts: IdleReleaseOptions): () => void {
  const tracker = new IdleTracker(opts.idleMs);
  const sample = (): Sample => {
    const cpu = process.cpuUsage();
    return {
      atMs: performance.now(),
      cpuMs: (cpu.user + cpu.system) / 1000,
      heapBytes: getHeapStatistics().total_heap_size,
    };
  };
  let releasing = false;
  const tick = () => {
    const now = sample();
    if (releasing || !tracker.observe(now)) return;
    releasing = true;
    releaseMemory()
      .then((heapAfter) => {
        tracker.released(heapAfter);
        opts.onRelease?.({ heapBefore: now.heapBytes, heapAfter, ms: performance.now() - now.atMs });
      })
      .catch((err) => opts.onError?.(err))
      .finally(() => {
        releasing = false;
        // The GC's own CPU must not count as work on the next tick.
        tracker.observe(sample());
      });
  };
  // A few ticks per idle period, at most one a second: each is two cheap reads.
  const timer = setInterval(tick, Math.min(1000, Math.max(50, Math.floor(opts.idleMs / 4))));
  timer.unref();
  tick();
  return () => clearInterval(timer);
}
