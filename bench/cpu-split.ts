import type pg from 'pg';
import { PostgresCpu } from './postgres-cpu.js';
import { machineCpuMs, processCpuMs, selfCpuMs } from './process-usage.js';

/**
 * Where the CPU of one measured run went: the Baton server process (if any), this process (the
 * load generator, or the in-process peer library), the PostgreSQL backends connected to the
 * system's database (the bench's own admin sessions excluded), and everything else on the machine
 * (other users of this shared box, PostgreSQL's WAL writer, checkpointer and autovacuum).
 */

export interface CpuUsage {
  /** All in ms of CPU time over the run. */
  server: number;
  bench: number;
  postgres: number;
  /**
   * The whole PostgreSQL server's CPU (postmaster tree from /proc: exited and live backends, WAL
   * writer, autovacuum; bench/postgres-cpu.ts). Server-wide, so other databases' users count too.
   */
  postgresServer: number;
  machineBusy: number;
  machineTotal: number;
  wallMs: number;
}

async function backendPids(pool: pg.Pool, database: string): Promise<number[]> {
  const { rows } = await pool.query<{ pid: number }>(
    `SELECT pid FROM pg_stat_activity
     WHERE datname = $1 AND backend_type = 'client backend' AND application_name <> 'bench-admin'`,
    [database],
  );
  return rows.map((r) => r.pid);
}

export class CpuMeter {
  private server0 = 0;
  private bench0 = 0;
  private machine0 = { busy: 0, total: 0 };
  /** pid -> [CPU at start (0 for backends that connected later), last CPU seen]. */
  private backends = new Map<number, [number, number]>();
  private t0 = 0;
  private server: PostgresCpu | undefined;
  private timer: NodeJS.Timeout | undefined;
  private sampling: Promise<void> = Promise.resolve();

  constructor(
    private readonly admin: pg.Pool,
    private readonly database: string,
    private readonly serverCpuMs: () => number = () => 0,
    private readonly sampleEveryMs = 100,
  ) {}

  async start(): Promise<void> {
    this.backends = new Map();
    for (const pid of await backendPids(this.admin, this.database)) {
      const cpu = processCpuMs(pid) ?? 0;
      this.backends.set(pid, [cpu, cpu]);
    }
    this.server = await PostgresCpu.of(this.admin).catch(() => undefined);
    this.server?.start();
    this.server0 = this.serverCpuMs();
    this.bench0 = selfCpuMs();
    this.machine0 = machineCpuMs();
    this.t0 = performance.now();
    // Backends come and go (pools grow, pgbench disconnects at its end): sample them during the run
    // so that one that exits before stop() still counts up to its last sample.
    this.timer = setInterval(() => {
      this.sampling = this.sampling.then(() => this.sample()).catch(() => {});
    }, this.sampleEveryMs);
  }

  private async sample(): Promise<void> {
    for (const pid of await backendPids(this.admin, this.database)) this.observe(pid);
    for (const pid of this.backends.keys()) this.observe(pid);
  }

  private observe(pid: number): void {
    const cpu = processCpuMs(pid);
    if (cpu === undefined) return;
    const seen = this.backends.get(pid);
    if (seen) seen[1] = Math.max(seen[1], cpu);
    else this.backends.set(pid, [0, cpu]);
  }

  async stop(): Promise<CpuUsage> {
    clearInterval(this.timer);
    await this.sampling;
    const wallMs = performance.now() - this.t0;
    const machine = machineCpuMs();
    const postgresServer = this.server ? this.server.read() : Number.NaN;
    const server = this.serverCpuMs() - this.server0;
    const bench = selfCpuMs() - this.bench0;
    await this.sample();
    let postgres = 0;
    for (const [first, last] of this.backends.values()) postgres += last - first;
    return {
      server,
      bench,
      postgres,
      postgresServer,
      machineBusy: machine.busy - this.machine0.busy,
      machineTotal: machine.total - this.machine0.total,
      wallMs,
    };
  }
}
