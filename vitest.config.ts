import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts', 'clients/*/test/**/*.test.ts'],
    globalSetup: ['test/setup/global-setup.ts'],
    reporters: ['default', './test/support/summary-reporter.ts'],
    pool: 'forks',
    testTimeout: 30_000,
    hookTimeout: 120_000,
    teardownTimeout: 30_000,
    // Kysely is ESM with dynamic imports; inlining it avoids "Unknown file extension .ts" under vitest.
    server: { deps: { inline: ['kysely'] } },
  },
});
