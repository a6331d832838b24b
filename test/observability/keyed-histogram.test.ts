import { Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { KeyedHistogram } from '../../src/metrics/keyed-histogram.js';

/**
 * KeyedHistogram (src/metrics/keyed-histogram.ts) adds to prom-client's own series after the first
 * observation of a key: the exposition must be exactly what observe() makes of the same values.
 */
function pair() {
  const registries = [new Registry(), new Registry()] as const;
  const config = {
    name: 'h_seconds',
    help: 'h',
    labelNames: ['queue', 'route'] as const,
    buckets: [0.001, 0.01, 0.1, 1],
  };
  const plain = new Histogram({ ...config, registers: [registries[0]] });
  const keyed = new KeyedHistogram({ ...config, registers: [registries[1]] });
  const text = async () => [await registries[0].metrics(), await registries[1].metrics()];
  return { plain, keyed, text };
}

const VALUES = [0, 0.0005, 0.001, 0.0011, 0.01, 0.05, 0.1, 0.99, 1, 1.5, 1e9, 0.001];

describe('KeyedHistogram', () => {
  it('exposes what observe() exposes for the same values, over several label sets', async () => {
    const { plain, keyed, text } = pair();
    for (const [i, v] of VALUES.entries()) {
      for (const queue of ['a', 'b', 'c"d']) {
        const labels = { queue, route: i % 2 ? '/x' : '/y' };
        plain.observe(labels, v);
        keyed.observeKeyed(`${queue} ${labels.route}`, labels, v);
      }
    }
    const [theirs, ours] = await text();
    expect(ours).toBe(theirs);
    expect(ours).toContain('h_seconds_count{queue="a",route="/x"} 6');
  });

  it('starts again after reset() and remove(), and refuses what observe() refuses', async () => {
    const { plain, keyed, text } = pair();
    const labels = { queue: 'a', route: '/x' };
    for (const h of [plain, keyed]) h.observe(labels, 0.5);
    keyed.observeKeyed('a', labels, 0.5);
    plain.observe(labels, 0.5);
    for (const h of [plain, keyed]) h.reset();
    for (const v of VALUES) {
      plain.observe(labels, v);
      keyed.observeKeyed('a', labels, v);
    }
    for (const h of [plain, keyed]) h.remove(labels);
    plain.observe(labels, 0.02);
    keyed.observeKeyed('a', labels, 0.02);
    const [theirs, ours] = await text();
    expect(ours).toBe(theirs);
    expect(ours).toContain('h_seconds_count{queue="a",route="/x"} 1');
    expect(() => keyed.observeKeyed('a', labels, Number.NaN)).toThrow(TypeError);
    expect(() => keyed.observeKeyed('z', { nope: 'x' } as never, 1)).toThrow();
  });
});
