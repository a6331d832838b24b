import { getHeapStatistics } from 'node:v8';
import { describe, expect, it } from 'vitest';
import { GROWTH_BYTES, IdleTracker, releaseMemory } from '../../src/memory/idle-release.js';

const MiB = 2 ** 20;

describe('IdleTracker', () => {
  it('releases once the process has been idle for the whole period and the heap has grown', () => {
    const t = new IdleTracker(5000);
    const heap = 200 * MiB;
    expect(t.observe({ atMs: 0, cpuMs: 0, heapBytes: heap })).toBe(false);
    // Busy: 500 ms of CPU in a second.
    expect(t.observe({ atMs: 1000, cpuMs: 500, heapBytes: heap })).toBe(false);
    // Idle from 1 s on: 10 ms of CPU a second (1%).
    expect(t.observe({ atMs: 3000, cpuMs: 520, heapBytes: heap })).toBe(false);
    expect(t.observe({ atMs: 5000, cpuMs: 540, heapBytes: heap })).toBe(false);
    expect(t.observe({ atMs: 6000, cpuMs: 550, heapBytes: heap })).toBe(true);
  });

  it('starts the idle period again after a busy tick', () => {
    const t = new IdleTracker(2000);
    const heap = 200 * MiB;
    t.observe({ atMs: 0, cpuMs: 0, heapBytes: heap });
    expect(t.observe({ atMs: 1000, cpuMs: 1, heapBytes: heap })).toBe(false);
    // 100 ms of CPU in a second: 10%, busy.
    expect(t.observe({ atMs: 2000, cpuMs: 101, heapBytes: heap })).toBe(false);
    expect(t.observe({ atMs: 3000, cpuMs: 102, heapBytes: heap })).toBe(false);
    expect(t.observe({ atMs: 4000, cpuMs: 103, heapBytes: heap })).toBe(true);
  });

  it('does not release again until the heap has grown by GROWTH_BYTES since the last release', () => {
    const t = new IdleTracker(1000);
    t.observe({ atMs: 0, cpuMs: 0, heapBytes: 200 * MiB });
    expect(t.observe({ atMs: 1000, cpuMs: 0, heapBytes: 200 * MiB })).toBe(true);
    t.released(40 * MiB);
    expect(t.observe({ atMs: 2000, cpuMs: 0, heapBytes: 40 * MiB })).toBe(false);
    expect(t.observe({ atMs: 3000, cpuMs: 0, heapBytes: 40 * MiB + GROWTH_BYTES })).toBe(false);
    expect(t.observe({ atMs: 4000, cpuMs: 0, heapBytes: 41 * MiB + GROWTH_BYTES })).toBe(true);
  });
});

describe('releaseMemory', () => {
  it('shrinks a heap grown by short-lived garbage', async () => {
    // Enough short-lived allocation for V8 to grow the young generation.
    let keep: object[] = [];
    for (let i = 0; i < 3_000_000; i++) {
      keep.push({ i, s: `item ${i}` });
      if (keep.length > 50_000) keep = [];
    }
    keep = [];
    const before = getHeapStatistics().total_heap_size;
    const after = await releaseMemory();
    expect(after).toBeLessThan(before);
    expect(after).toBe(getHeapStatistics().total_heap_size);
  });
});
