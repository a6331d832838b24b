import type { Reporter, TestModule, Vitest } from 'vitest/node';

/**
 * Prints which PostgreSQL the run used, then one plain line at the very end, which CI reads:
 *   Tests: N passed, N failed, N skipped
 */
export default class SummaryReporter implements Reporter {
  private vitest: Vitest | undefined;

  onInit(vitest: Vitest) {
    this.vitest = vitest;
  }

  onTestRunEnd(testModules: ReadonlyArray<TestModule>, unhandledErrors: ReadonlyArray<unknown>) {
    const database = this.vitest?.getRootProject().getProvidedContext().databaseDescription;
    if (database) process.stdout.write(`\nTests used ${database}`);
    let passed = 0;
    let failed = 0;
    let skipped = 0;
    for (const mod of testModules) {
      for (const test of mod.children.allTests()) {
        const state = test.result().state;
        if (state === 'passed') passed++;
        else if (state === 'failed') failed++;
        else skipped++;
      }
      // A file that failed to load has no tests; count it as a failure so it cannot pass silently.
      if (mod.state() === 'failed' && [...mod.children.allTests()].length === 0) failed++;
    }
    failed += unhandledErrors.length;
    process.stdout.write(`\nTests: ${passed} passed, ${failed} failed, ${skipped} skipped\n`);
  }
}
