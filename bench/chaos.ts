import { formatSummary, runChaos } from '../test/chaos/harness.js';

/**
 * The long chaos run: `npm run chaos -- --minutes 10 [--seed N] [--jobs N] [--replicas N] [--workers N]`.
 * Same harness and checks as the short run in `npm test` (test/chaos/), for longer and with more
 * jobs. Prints progress and the summary; exits 1 if any invariant was violated.
 */
function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : fallback;
}

const minutes = arg('minutes', 10);
const seed = arg('seed', Math.floor(Math.random() * 1e9));
const jobs = arg('jobs', Math.round(minutes * 60 * 150));
const started = Date.now();
console.log(`chaos: ${minutes} min, ${jobs} jobs, seed ${seed}`);
const summary = await runChaos({
  seed,
  durationMs: minutes * 60_000,
  jobs,
  replicas: arg('replicas', 3),
  workers: arg('workers', 8),
  log: (line) => console.log(`[${((Date.now() - started) / 1000).toFixed(0)}s] ${line}`),
});
console.log(formatSummary(summary));
process.exit(summary.ok ? 0 : 1);
