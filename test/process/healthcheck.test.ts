import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { useTestDatabase } from '../support/database.js';
import { freePort } from '../support/ports.js';
import { ServerProcess } from '../support/server-process.js';

const database = useTestDatabase();

/** The image's health check (src/cli/healthcheck.ts): its exit status, with HOST and PORT as given. */
async function healthcheck(host: string, port: number): Promise<number> {
  const run = promisify(execFile)(process.execPath, ['--import', 'tsx', 'src/cli/healthcheck.ts'], {
    env: { ...process.env, HOST: host, PORT: String(port) },
  });
  return run.then(
    () => 0,
    (err: { code: number }) => err.code,
  );
}

describe('health check', () => {
  it('asks the server at the configured HOST and PORT, not a fixed address', async () => {
    const port = await freePort();
    // Another loopback address than the usual 127.0.0.1, so a fixed address would miss it.
    const server = await ServerProcess.start({ DATABASE_URL: database.url }, port, { host: '127.0.0.2' });
    try {
      expect(await healthcheck('127.0.0.2', port)).toBe(0);
      expect(await healthcheck('127.0.0.1', port)).toBe(1);
    } finally {
      server.signal('SIGTERM');
      await server.exited;
    }
    expect(await healthcheck('127.0.0.2', port)).toBe(1);
  });
});
