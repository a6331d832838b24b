import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { chownSync, existsSync, mkdirSync, openSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';

/**
 * A PostgreSQL primary and a streaming standby with automatic failover, on this machine: the
 * pg_auto_failover monitor and two keepers from Debian's packages (postgresql-15-auto-failover,
 * pg-auto-failover-cli), each node on its own port and data folder under `dir`. Why
 * pg_auto_failover and not Patroni: one package, no etcd, and a monitor that is itself PostgreSQL;
 * it prints the multi-host URL (target_session_attrs=read-write) that Baton connects with.
 *
 * With `synchronous` (the default; pg_auto_failover's own default, replication-quorum on), the
 * primary's commits wait for the standby (synchronous_standby_names 'ANY 1 (...)'), so an acked
 * write survives losing the primary. Without, the standby leaves the quorum and replication is
 * asynchronous.
 *
 * Each process tree runs in its own process group, so kill() is a machine dying: keeper and
 * PostgreSQL together, SIGKILL, nothing flushed.
 */

const exec = promisify(execFile);
const PG_BIN = '/usr/lib/postgresql/15/bin';

export interface PairOptions {
  dir: string;
  /** The monitor listens here, the nodes on the next two ports. */
  basePort: number;
  synchronous?: boolean;
  log?: (line: string) => void;
}

export interface NodeState {
  name: string;
  port: number;
  reported: string;
  assigned: string;
}

export const NODE_NAMES = ['node1', 'node2'] as const;
export type NodeName = (typeof NODE_NAMES)[number];

/** Is pg_auto_failover installed (the tests and `npm run failover` need it)? */
export function failoverInstalled(): boolean {
  return existsSync('/usr/bin/pg_autoctl') && existsSync(join(PG_BIN, 'pg_ctl'));
}

export class FailoverPair {
  private readonly keepers = new Map<string, ChildProcess>();
  private readonly monitor: pg.Pool;
  private readonly asRoot = process.getuid?.() === 0;

  private constructor(private readonly opts: PairOptions) {
    // As the superuser: the monitor's settings are changed with ALTER SYSTEM.
    this.monitor = new pg.Pool({
      connectionString: `postgres://postgres@127.0.0.1:${opts.basePort}/pg_auto_failover`,
      max: 2,
      connectionTimeoutMillis: 2000,
    });
    this.monitor.on('error', () => {});
  }

  /** Start the monitor and both nodes; resolves once one is primary and the other its standby. */
  static async start(opts: PairOptions): Promise<FailoverPair> {
    if (!failoverInstalled()) {
      throw new Error(
        'pg_auto_failover is not installed: apt-get install postgresql-15-auto-failover pg-auto-failover-cli',
      );
    }
    killLeftovers(opts.dir);
    rmSync(opts.dir, { recursive: true, force: true });
    mkdirSync(opts.dir, { recursive: true });
    const pair = new FailoverPair(opts);
    try {
      await pair.build();
    } catch (err) {
      await pair.stop(false);
      throw err;
    }
    return pair;
  }

  private async build(): Promise<void> {
    const { opts } = this;
    // runuser's pg_autoctl writes here as postgres.
    if (this.asRoot) chownSync(opts.dir, ...postgresIds());
    this.keep('monitor', [
      'create',
      'monitor',
      '--pgdata',
      join(opts.dir, 'monitor'),
      '--pgport',
      String(opts.basePort),
      '--hostname',
      '127.0.0.1',
      '--auth',
      'trust',
      '--no-ssl',
      '--run',
    ]);
    await this.until(
      'the monitor answers',
      async () => {
        await this.monitor.query('SELECT 1 FROM pgautofailover.node LIMIT 1');
        return true;
      },
      60_000,
    );
    // Notice a dead node in about 3 s instead of 20 (the defaults suit real networks, not a test).
    for (const [name, value] of [
      ['health_check_period', 1000],
      ['health_check_timeout', 1000],
      ['health_check_max_retries', 1],
      ['health_check_retry_delay', 500],
      ['node_considered_unhealthy_timeout', 3000],
      // Before promoting the standby, the monitor gives a primary it cannot reach this long to have
      // demoted itself (its keeper does after network_partition_timeout, set below): the guard
      // against two primaries. 30 s by default; most of the time without service after a kill.
      ['primary_demote_timeout', 6000],
    ] as const) {
      await this.monitor.query(`ALTER SYSTEM SET pgautofailover.${name} = ${value}`);
    }
    await this.monitor.query('SELECT pg_reload_conf()');
    for (const [i, name] of NODE_NAMES.entries()) {
      this.keep(name, [
        'create',
        'postgres',
        '--pgdata',
        join(opts.dir, name),
        '--pgport',
        String(opts.basePort + 1 + i),
        '--hostname',
        '127.0.0.1',
        '--name',
        name,
        '--monitor',
        this.monitorUrl,
        '--auth',
        'trust',
        '--no-ssl',
        '--dbname',
        'baton',
        '--run',
      ]);
      // One after the other: the second must find a primary to follow.
      await this.until(
        `${name} registered`,
        async () => (await this.states()).some((s) => s.name === name),
        60_000,
      );
    }
    await this.settled();
    for (const name of NODE_NAMES) {
      const pgdata = join(opts.dir, name);
      await this.autoctl(['config', 'set', '--pgdata', pgdata, 'timeout.network_partition_timeout', '4']);
      await this.autoctl(['reload', '--pgdata', pgdata]);
    }
    if (opts.synchronous === false) {
      for (const name of NODE_NAMES)
        await this.autoctl(['set', 'node', 'replication-quorum', 'false', '--pgdata', join(opts.dir, name)]);
      await this.settled();
    }
  }

  /** Whether commits are meant to wait for the standby (the pair was started synchronous). */
  get synchronous(): boolean {
    return this.opts.synchronous !== false;
  }

  get monitorUrl(): string {
    return `postgres://autoctl_node@127.0.0.1:${this.opts.basePort}/pg_auto_failover?sslmode=disable`;
  }

  /** Baton's DATABASE_URL: both nodes, the primary chosen by target_session_attrs=read-write. */
  get url(): string {
    const { basePort } = this.opts;
    return `postgres://postgres@127.0.0.1:${basePort + 1},127.0.0.1:${basePort + 2}/baton?target_session_attrs=read-write`;
  }

  /** One node's own URL (to read what it holds, or to check what it is). */
  nodeUrl(name: NodeName): string {
    return `postgres://postgres@127.0.0.1:${this.portOf(name)}/baton`;
  }

  portOf(name: NodeName): number {
    return this.opts.basePort + 1 + NODE_NAMES.indexOf(name);
  }

  async states(): Promise<NodeState[]> {
    const { rows } = await this.monitor.query<NodeState>(
      'SELECT nodename AS name, nodeport AS port, reportedstate::text AS reported, goalstate::text AS assigned FROM pgautofailover.node ORDER BY nodeid',
    );
    return rows;
  }

  /** The node the monitor has as primary now (reported and assigned), if any. */
  async primary(): Promise<NodeName | undefined> {
    const primary = (await this.states()).find((s) => s.reported === 'primary' && s.assigned === 'primary');
    return primary?.name as NodeName | undefined;
  }

  /** Until one node is primary and the other secondary, reported and assigned. */
  async settled(timeoutMs = 120_000): Promise<void> {
    await this.until(
      'a primary and a secondary',
      async () => {
        const states = await this.states();
        // A standby's base backup waits for a checkpoint; ask for one instead of waiting minutes.
        await this.checkpointPrimary();
        const stable = states.every((s) => s.reported === s.assigned);
        const roles = states.map((s) => s.reported).sort();
        if (!(stable && roles.length === 2 && roles[0] === 'primary' && roles[1] === 'secondary'))
          return false;
        // The monitor's view lags: also the primary itself, writing, with its standby streaming.
        const primary = states.find((s) => s.reported === 'primary')!.name as NodeName;
        return (await this.streamingStandbys(primary)) >= 1;
      },
      timeoutMs,
    );
  }

  /**
   * How the node replicates now: its synchronous_standby_names and each standby's sync_state and
   * how many bytes its flush trails the primary's WAL. A commit is only known to survive the
   * primary's death when the first is set and a standby is 'quorum' or 'sync'.
   */
  async replication(
    name: NodeName,
  ): Promise<{ standbyNames: string; standbys: { state: string; lag: number }[] }> {
    return this.onNode(name, { standbyNames: '?', standbys: [] }, async (client) => {
      const names = await client.query<{ s: string }>(
        "SELECT current_setting('synchronous_standby_names') AS s",
      );
      const { rows } = await client.query<{ state: string; lag: string }>(
        'SELECT sync_state AS state, pg_wal_lsn_diff(pg_current_wal_lsn(), flush_lsn)::bigint::text AS lag FROM pg_stat_replication',
      );
      return {
        standbyNames: names.rows[0]!.s,
        standbys: rows.map((r) => ({ state: r.state, lag: Number(r.lag) })),
      };
    });
  }

  /**
   * Until the node is primary by the monitor's account and its commits wait for a standby (the
   * monitor drops synchronous replication while it has a standby catching up: wait_primary).
   */
  async untilSynchronous(name: NodeName, timeoutMs = 60_000): Promise<void> {
    await this.until(
      `${name} primary with a synchronous standby`,
      async () => {
        const state = (await this.states()).find((s) => s.name === name);
        if (state?.reported !== 'primary' || state.assigned !== 'primary') return false;
        const { standbyNames, standbys } = await this.replication(name);
        return standbyNames !== '' && standbys.some((s) => s.state === 'quorum' || s.state === 'sync');
      },
      timeoutMs,
    );
  }

  /**
   * Until a standby of the node has flushed all the WAL the node had written when this was called.
   * Synchronous replication covers commits made while it is on; the commits a new primary
   * acknowledged before it, while the monitor had it run asynchronously (wait_primary), reach the
   * standby only as it streams: a primary killed before then takes them with it, as with
   * asynchronous replication (docs/reliability.md).
   */
  async untilStandbyFlushed(name: NodeName, timeoutMs = 60_000): Promise<void> {
    const written = await this.onNode(name, undefined, async (client) => {
      const { rows } = await client.query<{ lsn: string }>('SELECT pg_current_wal_lsn()::text AS lsn');
      return rows[0]!.lsn;
    });
    if (written === undefined) throw new Error(`failover pair: ${name} does not answer`);
    await this.until(
      `a standby of ${name} flushed to ${written}`,
      () =>
        this.onNode(name, false, async (client) => {
          const { rows } = await client.query<{ flushed: boolean }>(
            'SELECT coalesce(bool_or(flush_lsn >= $1::pg_lsn), false) AS flushed FROM pg_stat_replication',
            [written],
          );
          return rows[0]!.flushed;
        }),
      timeoutMs,
    );
  }

  /** The monitor's log of state changes, oldest first, one line each (to explain a failed run). */
  async events(): Promise<string[]> {
    const { rows } = await this.monitor.query<{ line: string }>(
      `SELECT to_char(eventtime, 'HH24:MI:SS.MS') || ' ' || nodename || ' ' || reportedstate || ' -> ' || goalstate
              || ' (' || reportedrepstate || ', lsn ' || reportedlsn || '): ' || description AS line
         FROM pgautofailover.event ORDER BY eventid`,
    );
    return rows.map((r) => r.line);
  }

  /** A planned switchover (`pg_autoctl perform switchover`), resolved once it is done. */
  async switchover(): Promise<void> {
    await this.autoctl(['perform', 'switchover', '--pgdata', join(this.opts.dir, 'monitor')]);
    await this.settled();
  }

  /** The node's machine dies: its keeper and PostgreSQL killed with SIGKILL. */
  kill(name: NodeName): void {
    const keeper = this.keepers.get(name);
    if (keeper?.pid) {
      try {
        process.kill(-keeper.pid, 'SIGKILL');
      } catch {}
    }
    this.keepers.delete(name);
  }

  /** A killed node comes back (its keeper again), and rejoins as the standby. */
  restart(name: NodeName): void {
    this.keep(name, ['run', '--pgdata', join(this.opts.dir, name)]);
  }

  /** Stop everything and remove the data folders (kept, with the logs, after a failed start). */
  async stop(removeFiles = true): Promise<void> {
    await this.monitor.end().catch(() => {});
    for (const keeper of this.keepers.values()) {
      try {
        if (keeper.pid) process.kill(-keeper.pid, 'SIGKILL');
      } catch {}
    }
    this.keepers.clear();
    if (removeFiles) rmSync(this.opts.dir, { recursive: true, force: true });
  }

  private env(): NodeJS.ProcessEnv {
    const { dir } = this.opts;
    return {
      ...process.env,
      PG_CONFIG: join(PG_BIN, 'pg_config'),
      XDG_CONFIG_HOME: join(dir, 'config'),
      XDG_DATA_HOME: join(dir, 'data'),
      XDG_RUNTIME_DIR: join(dir, 'run'),
      PGHOST: '127.0.0.1',
    };
  }

  /** pg_autoctl as the postgres user when we are root (it refuses to run as root). */
  private command(args: string[]): [string, string[]] {
    return this.asRoot ? ['runuser', ['-u', 'postgres', '--', 'pg_autoctl', ...args]] : ['pg_autoctl', args];
  }

  private keep(name: string, args: string[]): void {
    const [cmd, argv] = this.command(args);
    const out = openSync(join(this.opts.dir, `${name}.log`), 'a');
    const child = spawn(cmd, argv, { env: this.env(), detached: true, stdio: ['ignore', out, out] });
    child.on('error', (err) => this.opts.log?.(`${name}: ${err.message}`));
    this.keepers.set(name, child);
  }

  private async autoctl(args: string[]): Promise<void> {
    const [cmd, argv] = this.command(args);
    await exec(cmd, argv, { env: this.env(), timeout: 120_000 });
  }

  /**
   * One short session on a node; `fallback` when it does not answer (not up yet, or going down:
   * the next poll asks again).
   */
  private async onNode<T>(name: NodeName, fallback: T, use: (client: pg.Client) => Promise<T>): Promise<T> {
    const client = new pg.Client({ connectionString: this.nodeUrl(name), connectionTimeoutMillis: 1000 });
    client.on('error', () => {});
    try {
      await client.connect();
      return await use(client);
    } catch {
      return fallback;
    } finally {
      await client.end().catch(() => {});
    }
  }

  private streamingStandbys(name: NodeName): Promise<number> {
    return this.onNode(name, 0, async (client) => {
      const { rows } = await client.query<{ n: number }>(
        "SELECT (SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming')::int AS n WHERE NOT pg_is_in_recovery()",
      );
      return rows[0]?.n ?? 0;
    });
  }

  private async checkpointPrimary(): Promise<void> {
    for (const name of NODE_NAMES) {
      await this.onNode(name, undefined, async (client) => {
        const { rows } = await client.query<{ standby: boolean }>('SELECT pg_is_in_recovery() AS standby');
        if (!rows[0]!.standby) await client.query('CHECKPOINT');
      });
    }
  }

  private async until(what: string, check: () => Promise<boolean>, timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    let last: unknown;
    while (Date.now() < deadline) {
      try {
        if (await check()) return;
      } catch (err) {
        last = err;
      }
      await new Promise((r) => setTimeout(r, 500));
    }
    throw new Error(
      `failover pair: ${what} not reached in ${timeoutMs} ms${last ? ` (${(last as Error).message})` : ''}; logs in ${this.opts.dir}`,
    );
  }
}

/**
 * Processes of an earlier pair in the same folder (a run that crashed before stop()): killed with
 * their process groups, or the new monitor and nodes would find their ports taken.
 */
function killLeftovers(dir: string): void {
  for (const pid of readdirSync('/proc').filter((name) => /^\d+$/.test(name))) {
    try {
      const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ');
      if (!cmdline.includes(`${dir}/`) || Number(pid) === process.pid) continue;
      const pgid = Number(readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')[2]);
      process.kill(-pgid, 'SIGKILL');
    } catch {
      // Gone meanwhile, or not ours to read.
    }
  }
}

/** The postgres user's uid and gid, which pg_autoctl runs as when we are root. */
function postgresIds(): [number, number] {
  const line = readFileSync('/etc/passwd', 'utf8')
    .split('\n')
    .find((l) => l.startsWith('postgres:'));
  if (!line) throw new Error('no postgres user on this machine');
  const [, , uid, gid] = line.split(':');
  return [Number(uid), Number(gid)];
}
