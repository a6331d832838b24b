import { describe, expect, it } from 'vitest';
import { formatSummary, runChaos } from './harness.js';
import { noViolations } from './ledger.js';

/**
 * The short chaos run (about a minute): replicas, workers and PostgreSQL itself are killed and
 * restarted while thousands of jobs flow, and every job must end exactly as it should.
 * `npm run chaos -- --minutes 10` is the long run (bench/chaos.ts). CHAOS_SEED replays a run.
 */
describe('chaos', () => {
  it('loses nothing and never lets two leases overlap, under kills and restarts', async () => {
    const seed = Number(process.env.CHAOS_SEED ?? Math.floor(Math.random() * 1e9));
    const summary = await runChaos({ seed, durationMs: 45_000, jobs: 5000, log: () => {} });
    console.log(formatSummary(summary));
    expect(summary.violations).toEqual(noViolations());
    expect(summary.jobs).toBe(5000);
    expect(summary.kills.server).toBeGreaterThan(0);
    expect(summary.kills.worker).toBeGreaterThan(0);
    expect(summary.kills.backends).toBeGreaterThan(0);
    expect(summary.kills.postgres).toBe(1);
  }, 300_000);
});
