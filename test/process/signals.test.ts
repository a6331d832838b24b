import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { useTestDatabase } from '../support/database.js';
import { freePort } from '../support/ports.js';
import { descendants, isAlive } from '../support/process-tree.js';
import { ServerProcess } from '../support/server-process.js';

const database = useTestDatabase();

describe('signals reach the server', () => {
  it('one SIGTERM to the PID of `npm start` (what a process manager holds) drains and stops everything', async () => {
    const port = await freePort();
    const server = await ServerProcess.start({ DATABASE_URL: database.url, LOG_LEVEL: 'info' }, port, {
      via: 'npm',
    });
    const started = descendants(server.child.pid!);
    try {
      expect(started.length).toBeGreaterThan(0);
      server.signal('SIGTERM');
      expect(await server.exited).toBe(0);
      expect(server.output).toContain('"msg":"stopped"');
      expect(started.filter(isAlive)).toEqual([]);
      await expect(fetch(`${server.url}/healthz`)).rejects.toThrow();
    } finally {
      for (const pid of started.filter(isAlive)) process.kill(pid, 'SIGKILL');
    }
  });

  it('Ctrl-C of `npm start` on its embedded PostgreSQL stops quietly: every connection closed before the database stops', async () => {
    // The database stops after Baton has closed its pools; a pool's end had not waited for its
    // connections to close, so the database's shutdown ended one and Baton warned of it.
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'baton-ctrl-c-'));
    await fs.chmod(dir, 0o755);
    const env = {
      DATABASE_URL: '',
      BATON_PGDATA: path.join(dir, 'pgdata'),
      BATON_EMBEDDED_PG_PORT: String(await freePort()),
      LOG_LEVEL: 'info',
    };
    try {
      for (let round = 0; round < 3; round++) {
        const server = await ServerProcess.start(env, await freePort());
        // Work that leaves connections idle in every pool, as a session of use does.
        const post = (url: string, body: unknown) =>
          fetch(`${server.url}${url}`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify(body),
          });
        await Promise.all(
          Array.from({ length: 20 }, (_, i) => post('/v1/queues/ctrl-c/jobs', { payload: i })),
        );
        await Promise.all(Array.from({ length: 5 }, () => post('/v1/queues/ctrl-c/claim', { max_jobs: 2 })));
        await new Promise((r) => setTimeout(r, 1500));
        server.signal('SIGINT');
        expect(await server.exited).toBe(0);
        expect(server.output).toContain('"msg":"stopped"');
        const loud = server.output.split('\n').filter((l) => /"level":(40|50|60)/.test(l));
        expect(loud, `round ${round}`).toEqual([]);
      }
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
  }, 120_000);
});
