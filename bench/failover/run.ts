import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { FailoverPair } from '../../test/support/failover/pair.js';
import { runFailoverScenario, startReplicas } from '../../test/support/failover/scenario.js';

/**
 * Failovers under load, with figures: `npx tsx bench/failover/run.ts [--rounds 3] [--async]
 * [--replicas 3]`. Each round a switchover, a killed primary and its return (scenario.ts); prints
 * what was lost, if anything, and the time without service after each kill (p50 and max).
 */
const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '3' },
    replicas: { type: 'string', default: '3' },
    async: { type: 'boolean', default: false },
    port: { type: 'string', default: '16500' },
  },
});
const started = Date.now();
const log = (line: string) => console.log(`[${((Date.now() - started) / 1000).toFixed(0)}s] ${line}`);
const pair = await FailoverPair.start({
  dir: join(tmpdir(), 'baton-failover-bench'),
  basePort: Number(values.port),
  synchronous: !values.async,
});
const replicas = await startReplicas(pair.url, Number(values.replicas));
let failed = false;
try {
  const s = await runFailoverScenario({ pair, replicas, rounds: Number(values.rounds), log });
  const sorted = [...s.windows].sort((a, b) => a - b);
  const p50 = sorted[Math.floor((sorted.length - 1) / 2)]!;
  console.log(`replication ${values.async ? 'asynchronous' : 'synchronous'}, ${s.rounds} rounds, ${replicas.length} replicas
  jobs enqueued ${s.enqueued}, acked ${s.acked}, not yet worked when the drain ended ${s.unfinished}
  lost enqueues ${s.lostEnqueues.length}, lost acks ${s.lostAcks.length}, double acks ${s.doubleAcks}, hung ${s.hung}
  without service after a kill: p50 ${p50.toFixed(1)} s, max ${sorted.at(-1)!.toFixed(1)} s (${s.windows.map((w) => w.toFixed(1)).join(', ')})
  503s around a switchover: ${s.switchoverWindows.map((w) => w.toFixed(1)).join(', ')} s
  answers other than success: ${JSON.stringify(s.failures)}, 503 without Retry-After ${s.withoutRetryAfter}
  leaders at the end ${s.leadersAtEnd}, the lease row on the primary names it: ${s.leaseRowNamesLeader}`);
} catch (err) {
  failed = true;
  console.error(err);
} finally {
  for (const app of replicas) await app.close();
  // After a failure the data folders and the keepers' logs stay, for reading.
  await pair.stop(!failed);
}
process.exit(failed ? 1 : 0);
