import fs from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { startEmbeddedPostgres } from '../src/db/embedded-postgres.js';
import { noLog } from '../src/logger.js';
import { freePort } from './support/ports.js';

const log = noLog;

describe('embedded PostgreSQL', () => {
  const dirs: string[] = [];
  afterAll(async () => {
    for (const d of dirs) await fs.rm(d, { recursive: true, force: true });
  });

  it('a port another program holds: start-up says which setting to change', async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'baton-embedded-'));
    await fs.chmod(dir, 0o755);
    dirs.push(dir);
    const port = await freePort();
    const holder = net.createServer();
    await new Promise<void>((resolve) => holder.listen(port, '127.0.0.1', resolve));
    try {
      await expect(startEmbeddedPostgres({ dataDir: path.join(dir, 'pgdata'), port, log })).rejects.toThrow(
        new RegExp(`port ${port} is taken .*set BATON_EMBEDDED_PG_PORT to a free port, or DATABASE_URL`),
      );
    } finally {
      holder.close();
    }
  }, 120_000);

  it('keeps data across a stop and a start', async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'baton-embedded-'));
    await fs.chmod(dir, 0o755);
    dirs.push(dir);
    const dataDir = path.join(dir, 'pgdata');
    const port = await freePort();

    const first = await startEmbeddedPostgres({ dataDir, port, log });
    const c1 = new pg.Client({ connectionString: first.url });
    await c1.connect();
    await c1.query('CREATE TABLE kept (v text)');
    await c1.query(`INSERT INTO kept VALUES ('survives')`);
    await c1.end();
    await first.stop();

    const second = await startEmbeddedPostgres({ dataDir, port, log });
    const c2 = new pg.Client({ connectionString: second.url });
    await c2.connect();
    const r = await c2.query('SELECT v FROM kept');
    await c2.end();
    await second.stop();
    expect(r.rows).toEqual([{ v: 'survives' }]);
  }, 120_000);
});
