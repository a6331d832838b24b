/**
 * How big each scenario is. `--quick` is a smoke run (about two minutes on this two-core machine);
 * the full run produces the numbers in docs/benchmarks.md.
 */

export interface Sizes {
  rounds: number;
  /** Scenario 1: jobs per run; HTTP workers and producers. */
  batchedJobs: number;
  batchedWorkers: number;
  batchedProducers: number;
  /** pgbench clients for the raw-SQL ceiling. */
  ceilingClients: number;
  /** Scenario 2: jobs per run; workers (one job per request) and producers (one job per request). */
  singleJobs: number;
  singleWorkers: number;
  singleProducers: number;
  /** Scenario 3: jobs per run for single-job requests, batches of 100 and of 1,000. */
  enqueueSingleJobs: number;
  enqueueConcurrency: number;
  enqueueBatch100Jobs: number;
  enqueueBatch1000Jobs: number;
  enqueueBatchConcurrency: number;
  /** Scenario 4: backlog sizes, claims measured per backlog and round, jobs per claim. */
  inFlightBacklog: number;
  scheduledBacklog: number;
  historyBacklog: number;
  claimSamples: number;
  /** The naive design's claims take up to 100× longer with a backlog, so it gets fewer per burst. */
  naiveClaimSamples: number;
  claimSize: number;
  /** Rounds of the latency scenarios (4, 5, 6) and of the prune measurement. */
  claimRounds: number;
  /** Scenario 5: claimed jobs being renewed, renewal burst length, concurrent renewers. */
  renewJobs: number;
  renewBurstMs: number;
  renewers: number;
  /** Scenario 6: wake-ups measured per path and round. */
  wakeSamples: number;
  /** Prune: finished jobs pruned per run. */
  pruneRows: number;
  /** SQS: jobs per run of the SQS scenario (batches of 10), its workers and producers. */
  sqsJobs: number;
  /** SQS: jobs/s the producers send in the paced runs (equal load for both APIs). */
  sqsPacedRate: number;
  sqsWorkers: number;
  sqsProducers: number;
  /**
   * Flow: ready jobs in each queue of the flow claim-cost part (one queue without groups, one per
   * group count from 10 to 10,000, all in the ring at once).
   */
  flowReadyJobs: number;
  /** Worker libraries: no-op jobs per run, and every worker's concurrency. */
  libraryJobs: number;
  libraryConcurrency: number;
}

export const QUICK: Sizes = {
  rounds: 2,
  batchedJobs: 10_000,
  batchedWorkers: 8,
  batchedProducers: 2,
  ceilingClients: 4,
  singleJobs: 1_000,
  singleWorkers: 16,
  singleProducers: 4,
  enqueueSingleJobs: 1_500,
  enqueueConcurrency: 16,
  enqueueBatch100Jobs: 10_000,
  enqueueBatch1000Jobs: 20_000,
  enqueueBatchConcurrency: 2,
  inFlightBacklog: 50_000,
  scheduledBacklog: 50_000,
  historyBacklog: 100_000,
  claimSamples: 150,
  naiveClaimSamples: 50,
  claimSize: 10,
  claimRounds: 2,
  renewJobs: 500,
  renewBurstMs: 2_000,
  renewers: 8,
  wakeSamples: 30,
  pruneRows: 20_000,
  sqsJobs: 5_000,
  sqsPacedRate: 200,
  sqsWorkers: 8,
  sqsProducers: 2,
  flowReadyJobs: 100_000,
  libraryJobs: 5_000,
  libraryConcurrency: 16,
};

export const FULL: Sizes = {
  rounds: 5,
  batchedJobs: 100_000,
  batchedWorkers: 8,
  batchedProducers: 2,
  ceilingClients: 4,
  singleJobs: 3_000,
  singleWorkers: 16,
  singleProducers: 4,
  enqueueSingleJobs: 3_000,
  enqueueConcurrency: 16,
  enqueueBatch100Jobs: 50_000,
  enqueueBatch1000Jobs: 100_000,
  enqueueBatchConcurrency: 2,
  inFlightBacklog: 100_000,
  scheduledBacklog: 100_000,
  historyBacklog: 1_000_000,
  claimSamples: 1_000,
  naiveClaimSamples: 200,
  claimSize: 10,
  claimRounds: 3,
  renewJobs: 1_000,
  renewBurstMs: 10_000,
  renewers: 8,
  wakeSamples: 200,
  pruneRows: 100_000,
  sqsJobs: 20_000,
  sqsPacedRate: 300,
  sqsWorkers: 8,
  sqsProducers: 2,
  flowReadyJobs: 1_000_000,
  libraryJobs: 20_000,
  libraryConcurrency: 16,
};

/**
 * Jobs sent through a full-cycle run's producers and workers before the timed part, followed by
 * VACUUM ANALYZE of the system's database, so that every system starts its timed run from the same
 * kind of steady state: statistics that describe its tables (a fresh queue whose statistics say
 * "empty" sent pg-boss's fetch down a sequential scan: 1.3k jobs/s cold, 10k+ once analysed) and no
 * dead rows left by an earlier scenario (graphile-worker's jobs table, on default autovacuum
 * settings, still held 460k dead rows from scenario 1 when scenario 2 started; Baton's tables carry
 * their own aggressive autovacuum settings).
 */
export const warmUp = (n: number) => Math.max(100, Math.round(n / 10 / 100) * 100);
