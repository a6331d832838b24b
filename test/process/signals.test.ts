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
});
