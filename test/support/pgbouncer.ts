import { type ChildProcess, spawn } from 'node:child_process';
import { chmodSync, chownSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { userInfo } from 'node:os';
import { join } from 'node:path';
import { freePort } from './ports.js';
import { until } from './until.js';

/** Debian's package (`.ci/run` installs it). */
export const PGBOUNCER = '/usr/sbin/pgbouncer';

export interface PgBouncer {
  /** `database` through PgBouncer: the same URL with its host and port. */
  url(database: string): string;
  /** What PgBouncer has logged so far. */
  log(): string;
  stop(): Promise<void>;
}

/**
 * A real PgBouncer in front of the test PostgreSQL that `adminUrl` names: its default settings but
 * for `pool_mode = transaction` (its default is session), every database passed through, the URL's
 * user allowed in. PgBouncer will not run as root: as root it is started as the `postgres` user.
 */
export async function startPgBouncer(
  adminUrl: string,
  settings: Record<string, string> = {},
): Promise<PgBouncer> {
  const admin = new URL(adminUrl);
  const port = await freePort();
  const dir = mkdtempSync('/tmp/baton-pgbouncer-');
  const user = decodeURIComponent(admin.username || 'postgres');
  writeFileSync(join(dir, 'userlist.txt'), `"${user}" "${decodeURIComponent(admin.password)}"\n`);
  const ini = {
    listen_addr: '127.0.0.1',
    listen_port: String(port),
    unix_socket_dir: '',
    auth_type: admin.password ? 'plain' : 'trust',
    auth_file: join(dir, 'userlist.txt'),
    logfile: join(dir, 'pgbouncer.log'),
    pool_mode: 'transaction',
    ...settings,
  };
  writeFileSync(
    join(dir, 'pgbouncer.ini'),
    `[databases]\n* = host=${admin.hostname} port=${admin.port || '5432'}\n\n[pgbouncer]\n${Object.entries(
      ini,
    )
      .map(([k, v]) => `${k} = ${v}`)
      .join('\n')}\n`,
  );
  const asRoot = userInfo().uid === 0;
  if (asRoot) {
    const { uid, gid } = postgresUser();
    chownSync(dir, uid, gid);
    for (const f of ['userlist.txt', 'pgbouncer.ini']) chownSync(join(dir, f), uid, gid);
  }
  chmodSync(dir, 0o700);
  const child: ChildProcess = spawn(
    PGBOUNCER,
    [...(asRoot ? ['-u', 'postgres'] : []), join(dir, 'pgbouncer.ini')],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let output = '';
  child.stdout?.on('data', (d) => (output += d));
  child.stderr?.on('data', (d) => (output += d));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const log = () => {
    try {
      return output + readFileSync(join(dir, 'pgbouncer.log'), 'utf8');
    } catch {
      return output;
    }
  };
  try {
    await until(() => child.exitCode !== null || /listening on 127\.0\.0\.1:\d+/.test(log()), 10_000);
  } catch {
    child.kill('SIGKILL');
    throw new Error(`PgBouncer did not start:\n${log()}`);
  }
  if (child.exitCode !== null) throw new Error(`PgBouncer exited at start:\n${log()}`);
  return {
    url: (database) => {
      const url = new URL(adminUrl);
      url.hostname = '127.0.0.1';
      url.port = String(port);
      url.pathname = `/${database}`;
      return url.toString();
    },
    log,
    stop: async () => {
      child.kill('SIGTERM');
      await Promise.race([exited, new Promise((r) => setTimeout(r, 3000))]);
      child.kill('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

function postgresUser(): { uid: number; gid: number } {
  const line = readFileSync('/etc/passwd', 'utf8')
    .split('\n')
    .find((l) => l.startsWith('postgres:'));
  if (!line) throw new Error('PgBouncer will not run as root, and there is no postgres user to run it as');
  const [, , uid, gid] = line.split(':');
  return { uid: Number(uid), gid: Number(gid) };
}
