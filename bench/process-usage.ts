import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

/**
 * CPU time and memory of processes, read from /proc (Linux). Used to split where the CPU goes in a
 * scenario: the Baton server, the load generator (this process), PostgreSQL's backends, and the rest
 * of the machine (other users of this shared box, PostgreSQL's background processes).
 */

let ticksPerSecond: number | undefined;
export function clockTicks(): number {
  if (ticksPerSecond === undefined) {
    try {
      ticksPerSecond = Number(execFileSync('getconf', ['CLK_TCK']).toString().trim()) || 100;
    } catch {
      ticksPerSecond = 100;
    }
  }
  return ticksPerSecond;
}

/** User + system CPU of one process in ms, or undefined when it is gone or unreadable. */
export function processCpuMs(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name is in parentheses and may contain spaces: split after the last ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // fields[0] is field 3 (state); utime and stime are fields 14 and 15.
    const ticks = Number(fields[11]) + Number(fields[12]);
    return (ticks * 1000) / clockTicks();
  } catch {
    return undefined;
  }
}

/** Resident set size of one process in bytes. */
export function processRssBytes(pid: number): number | undefined {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const match = /^VmRSS:\s+(\d+) kB/m.exec(status);
    return match ? Number(match[1]) * 1024 : undefined;
  } catch {
    return undefined;
  }
}

/** Busy and total CPU time of the whole machine (all cores) in ms, from /proc/stat. */
export function machineCpuMs(): { busy: number; total: number } {
  const line = readFileSync('/proc/stat', 'utf8').split('\n')[0]!;
  const v = line.trim().split(/\s+/).slice(1).map(Number);
  // user nice system idle iowait irq softirq steal guest guest_nice; guest time is already in user.
  const idle = (v[3] ?? 0) + (v[4] ?? 0);
  const total = v.slice(0, 8).reduce((a, b) => a + b, 0);
  const scale = 1000 / clockTicks();
  return { busy: (total - idle) * scale, total: total * scale };
}

/** CPU of this process (the bench script: load generator and in-process peers) in ms. */
export function selfCpuMs(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
}

/** Samples a process's RSS every `everyMs` and keeps the largest value seen. */
export class RssSampler {
  private timer: NodeJS.Timeout | undefined;
  peakBytes = 0;

  constructor(
    private readonly pid: () => number | undefined,
    private readonly everyMs = 100,
  ) {}

  start(): void {
    this.peakBytes = 0;
    this.sample();
    this.timer = setInterval(() => this.sample(), this.everyMs);
    this.timer.unref();
  }

  stop(): number {
    clearInterval(this.timer);
    this.sample();
    return this.peakBytes;
  }

  private sample(): void {
    const pid = this.pid();
    const rss = pid === undefined ? undefined : processRssBytes(pid);
    if (rss !== undefined && rss > this.peakBytes) this.peakBytes = rss;
  }
}
