import pg from 'pg';
import { connectionOptions } from '../src/db/database.js';
import { processCpuMs } from './process-usage.js';

/**
 * The loop the claim probes share (bench/ring-vs-flat-probe.ts, bench/claim-vs-graphile-probe.ts):
 * on one connection of the request pool's settings, each table in turn has 100 jobs claimed and then
 * deleted by id, round-robin until every table is empty, and the backend's CPU is added up per table
 * and per statement. Interleaving puts every table under the same machine noise.
 */

/** One table of a probe: its claim statement and values, and its delete of the rows claimed. */
export interface ClaimedTable {
  claim: string;
  values: unknown[];
  del: string;
  delValues(rows: pg.QueryResultRow[]): unknown[];
}

export type ProbeStats = Record<string, { claim: number; del: number; n: number }>;

/** A connection with the request pool's session settings (planner settings included). */
export async function probeConnection(url: string): Promise<{ client: pg.Client; cpuMs: () => number }> {
  const client = new pg.Client(
    connectionOptions(
      url,
      { poolSize: 1, statementTimeoutMs: 600_000, connectTimeoutMs: 5_000 },
      'baton-probe',
    ),
  );
  await client.connect();
  const pid: number = (await client.query('SELECT pg_backend_pid() AS pid')).rows[0].pid;
  return { client, cpuMs: () => processCpuMs(pid) ?? 0 };
}

export function emptyStats(names: string[]): ProbeStats {
  return Object.fromEntries(names.map((k) => [k, { claim: 0, del: 0, n: 0 }]));
}

/** Claim and delete until every table is empty; `round` rotates which table goes first. */
export async function drainInterleaved(
  probe: { client: pg.Client; cpuMs: () => number },
  tables: Record<string, ClaimedTable>,
  round: number,
  stats: ProbeStats,
): Promise<void> {
  const { client, cpuMs } = probe;
  const names = Object.keys(tables);
  const left = new Set(names);
  for (let i = 0; left.size > 0; i++) {
    const name = names[(i + round) % names.length]!;
    if (!left.has(name)) continue;
    const t = tables[name]!;
    let c0 = cpuMs();
    const { rows } = await client.query({ name: `claim-${name}`, text: t.claim, values: t.values });
    stats[name]!.claim += cpuMs() - c0;
    stats[name]!.n += rows.length;
    if (rows.length === 0) {
      left.delete(name);
      continue;
    }
    c0 = cpuMs();
    await client.query({ name: `del-${name}`, text: t.del, values: t.delValues(rows) });
    stats[name]!.del += cpuMs() - c0;
  }
}

export function printStats(stats: ProbeStats): void {
  for (const [k, s] of Object.entries(stats))
    console.log(
      `${k.padEnd(12)} jobs ${s.n}, backend CPU per 1,000 jobs: claim ${((s.claim / s.n) * 1000).toFixed(1)} ms, delete ${((s.del / s.n) * 1000).toFixed(1)} ms`,
    );
}
