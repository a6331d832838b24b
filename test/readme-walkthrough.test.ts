import { execFile } from 'node:child_process';
import fs from 'node:fs';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { useListeningApp } from './support/app.js';
import { useTestDatabase } from './support/database.js';

const run = promisify(execFile);
const database = useTestDatabase();

/** The README's curl walk-through, run as written against a real listening server. */
describe('README walk-through', () => {
  const server = useListeningApp(database);
  const _app = server.app;

  async function runBlock(name: string) {
    const readme = fs.readFileSync('README.md', 'utf8');
    const block = readme.split(`<!-- ${name}:start -->`)[1]!.split(`<!-- ${name}:end -->`)[0]!;
    const script = block.replace(/^\s*```sh\n/, '').replace(/```\s*$/, '');
    const { stdout } = await run('bash', ['-euo', 'pipefail', '-c', script], {
      env: { ...process.env, BATON: server.url },
    });
    return stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
  }

  it('runs every command of the job walk-through and each does what the comments say', async () => {
    const lines = await runBlock('walkthrough');
    expect(lines[0]).toMatchObject({ state: 'ready' });
    expect(lines[1]).toMatchObject({ id: lines[0].id, attempt: 1 });
    expect(lines[2].lease_expires_at).toEqual(expect.any(String));
    expect(lines[3]).toEqual({ id: lines[0].id, state: 'completed', result: { sent: true } });
    expect(lines[4]).toMatchObject({ state: 'scheduled' });
    expect(lines[5]).toEqual({ status: 409, code: 'lease_lost' });
    expect(lines[6]).toEqual({ state: 'scheduled', attempts: 1, last_error: 'smtp timeout' });
  });

  it('runs every command of "Operating Baton"', async () => {
    const lines = await runBlock('operating');
    expect(lines[0]).toEqual({ name: 'reports', lease_ms: 120000, inherited: [] });
    expect(lines[1]).toContain('reports');
    expect(lines[2]).toEqual({ ready: 0, claimed: 0, dead: 0, oldest_ready_age_ms: null });
    expect(lines[3]).toEqual({ paused: true });
    expect(lines[4]).toEqual({ paused: false });
    expect(lines[5]).toEqual({ jobs: [], next_cursor: null });
    expect(lines[6]).toEqual({ redriven: 0 });
    expect(lines[7]).toEqual({ cancelled: 0 });
    expect(lines[8]).toEqual({ name: 'reports', deleted: true, cancelled: 0 });
  });
});
