import { execFile } from 'node:child_process';
import net from 'node:net';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { useTestDatabase } from '../support/database.js';
import { freePort } from '../support/ports.js';
import { ServerProcess } from '../support/server-process.js';

const database = useTestDatabase();

/** Runs src/server.ts to its end (for start-ups that fail) and returns what it printed. */
async function failedStart(env: Record<string, string>) {
  try {
    await promisify(execFile)(process.execPath, ['--import', 'tsx', 'src/server.ts'], {
      env: { ...process.env, LOG_LEVEL: 'warn', HOST: '127.0.0.1', ...env },
      timeout: 30_000,
    });
  } catch (err) {
    const { code, stdout, stderr } = err as { code: number; stdout: string; stderr: string };
    return { code, stdout, stderr };
  }
  throw new Error('the server started');
}

describe('start-up', () => {
  it('prints the URL of the API, its dashboard and its docs; the dashboard is built from source', async () => {
    const port = await freePort();
    const server = await ServerProcess.start({ DATABASE_URL: database.url, LOG_LEVEL: 'info' }, port);
    try {
      const base = `http://127.0.0.1:${port}`;
      expect(server.output).toContain(
        `"msg":"Baton is listening: API ${base}, dashboard ${base}/ui, docs ${base}/docs"`,
      );
      expect((await fetch(`${base}/docs`)).status).toBe(200);
      // Run from source (as npm start does), the server bundles ui/ on the first request.
      expect((await fetch(`${base}/ui/app.js`)).status).toBe(200);
    } finally {
      server.signal('SIGTERM');
      await server.exited;
    }
  });

  it('with queue-limited keys and /metrics open, start-up warns once, saying what to set', async () => {
    const port = await freePort();
    const keys = [
      { name: 'root', sha256: 'a'.repeat(64), scopes: ['admin'] },
      { name: 'team-a', sha256: 'b'.repeat(64), scopes: ['producer'], queues: ['a.*'] },
    ];
    const server = await ServerProcess.start(
      { DATABASE_URL: database.url, BATON_API_KEYS: JSON.stringify(keys) },
      port,
    );
    try {
      const lines = server.output.split('\n').filter((l) => l.includes('/metrics answers without a key'));
      expect(lines).toHaveLength(1);
      expect(JSON.parse(lines[0]!)).toMatchObject({ level: 40 });
      expect(lines[0]).toContain('set BATON_OPEN_ENDPOINTS=readyz,docs');
    } finally {
      server.signal('SIGTERM');
      await server.exited;
    }
  });

  it('bad API keys and a missing schedules file stop start-up before any database, naming each variable', async () => {
    // The database does not answer: its error would come first, were it looked at.
    const unanswered = `postgres://baton@127.0.0.1:${await freePort()}/baton`;
    const run = await failedStart({
      DATABASE_URL: unanswered,
      BATON_API_KEYS: 'not json',
      BATON_SCHEDULES_FILE: '/nonexistent/schedules.yaml',
    });
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(
      /^Invalid configuration:\n {2}- BATON_API_KEYS is not valid JSON: .*\n {2}- BATON_SCHEDULES_FILE cannot be read: ENOENT.*\n$/,
    );
  });

  it('a port in use is one line naming the port and the setting, not a stack trace', async () => {
    const taken = net.createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const port = (taken.address() as net.AddressInfo).port;
    try {
      const run = await failedStart({ DATABASE_URL: database.url, PORT: String(port) });
      expect(run.code).toBe(1);
      expect(run.stderr).toBe(`port ${port} is in use; set PORT\n`);
    } finally {
      taken.close();
    }
  });

  it('a database that does not answer is one line naming it (without its password), not a stack trace', async () => {
    const port = await freePort();
    const run = await failedStart({ DATABASE_URL: `postgres://baton:s3cret@127.0.0.1:${port}/baton` });
    expect(run.code).toBe(1);
    expect(run.stderr).toBe(
      `the database at postgres://baton:***@127.0.0.1:${port}/baton refused the connection ` +
        '(is PostgreSQL running there?); check DATABASE_URL\n',
    );
    expect(run.stdout).not.toContain('s3cret');
  });

  it('a database that does not exist is one line saying so', async () => {
    const url = new URL(database.url);
    url.pathname = '/baton_no_such_database';
    const run = await failedStart({ DATABASE_URL: url.toString() });
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(
      /^the database at .*: database "baton_no_such_database" does not exist; create it or fix DATABASE_URL\n$/,
    );
  });
});
