import { defineConfig } from 'vitest/config';

/**
 * Three tiers, each file in one (docs/testing.md):
 * - fast: unit tests and tests of one Baton in process (app.inject or a listening app) against a
 *   real PostgreSQL: `npm run test:fast`, the loop to run while changing code;
 * - processes: tests that start processes (the server, workers, the libraries' packages, the AWS
 *   CLI, Chromium for the dashboard, an embedded PostgreSQL);
 * - kills: the libraries' kill tests (worker processes SIGKILLed under load), the two side by side:
 *   they mostly wait for the killed workers' leases to run out;
 * - alone: the long runs that load the whole machine on purpose (chaos, failover), one at a time once
 *   the others are done, so that nothing else competes with them.
 * `npm test` runs all of them, one tier after another. Files run side by side within the first two
 * (each file has a database of its own, copied from a migrated template).
 */
const KILLS = ['clients/*/test/kill.test.ts'];
const ALONE = ['test/chaos/**/*.test.ts', 'test/db/failover.test.ts'];
const PROCESSES = [
  'test/process/**/*.test.ts',
  'test/pgbouncer/**/*.test.ts',
  'test/examples/**/*.test.ts',
  'test/ui/**/*.test.ts',
  'test/cli/**/*.test.ts',
  'test/clients/**/*.test.ts',
  'test/sqs/cli.test.ts',
  'test/sqs/move-task-clients.test.ts',
  'test/sqs/consumer.test.ts',
  'test/readme-walkthrough.test.ts',
  'test/upgrade/**/*.test.ts',
  'test/embedded-postgres.test.ts',
  'test/security/shutdown.test.ts',
  'test/maintenance/schedules-races.test.ts',
  'clients/*/test/**/*.test.ts',
];
/**
 * Files at once: the fast tier's mostly wait on leases, timers and PostgreSQL; the process tier's
 * run real leases of a second or two in child processes, which a starved core makes expire, so
 * fewer of them share the machine (measured on two cores: docs/testing.md).
 */
const FAST_FILES = 3;
const PROCESS_FILES = 2;

export default defineConfig({
  test: {
    globalSetup: ['test/setup/global-setup.ts'],
    reporters: ['default', './test/support/summary-reporter.ts'],
    pool: 'forks',
    testTimeout: 30_000,
    hookTimeout: 120_000,
    teardownTimeout: 30_000,
    // Kysely is ESM with dynamic imports; inlining it avoids "Unknown file extension .ts" under vitest.
    server: { deps: { inline: ['kysely'] } },
    projects: [
      {
        extends: true,
        test: {
          name: 'fast',
          include: ['test/**/*.test.ts'],
          exclude: [...ALONE, ...KILLS, ...PROCESSES],
          // A worker process runs file after file: modules are imported once per worker, not once per
          // file. Nothing these files share lives in a module (each app has its own metrics registry,
          // pool and database).
          isolate: false,
          maxWorkers: FAST_FILES,
          sequence: { groupOrder: 0 },
        },
      },
      {
        extends: true,
        test: {
          name: 'processes',
          include: PROCESSES,
          exclude: [...ALONE, ...KILLS],
          maxWorkers: PROCESS_FILES,
          sequence: { groupOrder: 1 },
        },
      },
      {
        extends: true,
        test: { name: 'kills', include: KILLS, maxWorkers: 2, sequence: { groupOrder: 2 } },
      },
      {
        extends: true,
        test: { name: 'alone', include: ALONE, maxWorkers: 1, sequence: { groupOrder: 3 } },
      },
    ],
  },
});
