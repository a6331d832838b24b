import { readdirSync, readFileSync } from 'node:fs';
import type pg from 'pg';
import { clockTicks } from './process-usage.js';

/**
 * PostgreSQL's own CPU, read from /proc: everything the server did, whichever process did it.
 *
 * A PostgreSQL server is one postmaster and its children (client backends, autovacuum workers, the
 * WAL writer, checkpointer, background writer, parallel workers). The postmaster reaps its children,
 * so when a backend exits its CPU moves into the postmaster's cutime/cstime. The server's CPU so far
 * is therefore
 *
 *   postmaster utime + stime + cutime + cstime  +  utime + stime of every live child
 *
 * which counts backends that connected and left between two readings (the per-backend sampler in
 * cpu-split.ts can miss their last 100 ms) and the background processes (WAL writer, autovacuum) that
 * a per-database backend count leaves out. It is server-wide: on a shared server, other users'
 * sessions are in it too, so a run also reports `databaseBackends` (CpuMeter) and the load average.
 *
 * Only works for a server on this machine (the bench's PostgreSQL 15, or an embedded PostgreSQL 18):
 * the postmaster is found as the parent process of one of our own backends.
 */

interface Stat {
  ppid: number;
  /** utime + stime, in clock ticks. */
  own: number;
  /** cutime + cstime (reaped children), in clock ticks. */
  children: number;
}

function readStat(pid: number): Stat | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command may contain spaces and parentheses: fields start after the last ')'.
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // f[0] is field 3 (state), so field n is f[n - 3]: ppid 4, utime 14, stime 15, cutime 16, cstime 17.
    return {
      ppid: Number(f[1]),
      own: Number(f[11]) + Number(f[12]),
      children: Number(f[13]) + Number(f[14]),
    };
  } catch {
    return undefined;
  }
}

/** The postmaster of the server `pool` is connected to (the parent of one of its backends). */
export async function postmasterPid(pool: pg.Pool | pg.ClientBase): Promise<number> {
  const { rows } = await pool.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
  const backend = readStat(rows[0]!.pid);
  if (!backend)
    throw new Error(
      `cannot read /proc/${rows[0]!.pid}/stat: PostgreSQL is not on this machine (or not visible)`,
    );
  return backend.ppid;
}

export interface PostgresCpuReading {
  /** CPU ms of the whole server so far (postmaster, reaped children, live children). */
  totalMs: number;
  /** The same, split: the postmaster's own, its reaped children's, its live children's. */
  postmasterMs: number;
  exitedMs: number;
  liveMs: number;
  liveChildren: number;
}

/** One reading of a postmaster's CPU, its reaped children's and its live children's. */
export function readPostgresCpu(postmaster: number): PostgresCpuReading {
  const scale = 1000 / clockTicks();
  const pm = readStat(postmaster);
  if (!pm) throw new Error(`postmaster ${postmaster} is gone`);
  let live = 0;
  let liveChildren = 0;
  for (const name of readdirSync('/proc')) {
    const pid = Number(name);
    if (!Number.isInteger(pid) || pid === postmaster) continue;
    const s = readStat(pid);
    if (s?.ppid !== postmaster) continue;
    live += s.own;
    liveChildren++;
  }
  return {
    totalMs: (pm.own + pm.children + live) * scale,
    postmasterMs: pm.own * scale,
    exitedMs: pm.children * scale,
    liveMs: live * scale,
    liveChildren,
  };
}

/**
 * CPU of every PostgreSQL server in `postmasters` between start() and each read(): the difference of
 * two readings. A child that exits between the reading of the postmaster and the walk of /proc is
 * missed by that one reading and counted by the next, so only the two end points carry that error
 * (at most one exiting backend's CPU each).
 */
export class PostgresCpu {
  private start0 = 0;

  constructor(private readonly postmasters: number[]) {}

  static async of(...pools: (pg.Pool | pg.ClientBase)[]): Promise<PostgresCpu> {
    const pids = await Promise.all(pools.map((p) => postmasterPid(p)));
    return new PostgresCpu([...new Set(pids)]);
  }

  now(): number {
    return this.postmasters.reduce((sum, pid) => sum + readPostgresCpu(pid).totalMs, 0);
  }

  start(): void {
    this.start0 = this.now();
  }

  /** CPU ms since start(). */
  read(): number {
    return this.now() - this.start0;
  }
}
