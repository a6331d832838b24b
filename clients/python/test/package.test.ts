import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BatonApp } from '../../../src/app.js';
import { useTestDatabase } from '../../../test/support/database.js';
import { startWorker } from '../../../test/support/worker-process.js';
import { KEYS, PYTHON_ROOT, runPython, startBaton } from './harness.js';

/**
 * The package as a user gets it: installed offline into a fresh virtual environment (nothing else
 * in it), then the README's code run with that environment's Python, outside this checkout; and
 * src/baton/schema.py checked against the OpenAPI document it is generated from.
 */
const database = useTestDatabase();
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'baton-py-pkg-'));
const venv = path.join(dir, 'venv');
const python = path.join(venv, 'bin', 'python');
let app: BatonApp;
let url: string;
beforeAll(async () => {
  ({ app, url } = await startBaton(database));
});
afterAll(async () => {
  await app?.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

/** The README's fenced blocks marked `python run` (run to the end) and `python worker` (a process). */
function readmeBlocks(): { kind: 'run' | 'worker'; code: string }[] {
  const readme = fs.readFileSync(path.join(PYTHON_ROOT, 'README.md'), 'utf8');
  return [...readme.matchAll(/^```python (run|worker)\n([\s\S]*?)^```$/gm)].map((m) => ({
    kind: m[1] as 'run' | 'worker',
    code: m[2]!,
  }));
}

describe('the baton-client package', () => {
  it('installs offline into a fresh virtual environment, and the README’s code runs against Baton as written', async () => {
    execFileSync('python3', ['-m', 'venv', venv]);
    execFileSync(python, ['-m', 'pip', 'install', '--no-index', '--no-build-isolation', PYTHON_ROOT], {
      cwd: dir,
      stdio: 'pipe',
    });
    // Outside the checkout and without PYTHONPATH: `baton` is the installed package.
    const env = { BATON_URL: url, BATON_API_KEY: KEYS.admin, PYTHONPATH: '', PYTHONUNBUFFERED: '1' };
    const where = execFileSync(python, ['-c', 'import baton; print(baton.__file__)'], {
      cwd: dir,
      env,
    }).toString();
    expect(where.startsWith(venv)).toBe(true);
    expect(execFileSync(path.join(venv, 'bin', 'baton'), ['work', '--help'], { env }).toString()).toContain(
      '--command',
    );

    const blocks = readmeBlocks();
    expect(blocks.filter((b) => b.kind === 'worker')).toHaveLength(1);
    expect(blocks.filter((b) => b.kind === 'run').length).toBeGreaterThanOrEqual(3);
    const workers = blocks
      .filter((b) => b.kind === 'worker')
      .map((b) => startWorker(python, ['-c', b.code], { ...env, PYTHONPATH: '' }));
    try {
      for (const block of blocks.filter((b) => b.kind === 'run')) {
        // Not execFileSync: Baton runs in this process, and must answer while the block runs.
        const run = await runPython(['-c', block.code], env, dir, python);
        expect(run.code, `${block.code}\n${run.stderr}`).toBe(0);
        const expected = [...block.code.matchAll(/^# => (.*)$/gm)].map((m) => m[1]);
        expect(run.stdout.trimEnd().split('\n'), block.code).toEqual(expected);
      }
      for (const w of workers) w.child.kill('SIGTERM');
      expect(await Promise.all(workers.map((w) => w.exited))).toEqual(workers.map(() => 0));
    } finally {
      for (const w of workers) w.child.kill('SIGKILL');
    }
  }, 120_000);

  it('src/baton/schema.py is what generate_schema.py makes of openapi/openapi.json (regenerate it after an API change)', async () => {
    const run = await runPython(['generate_schema.py', '--stdout'], {});
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toBe(fs.readFileSync(path.join(PYTHON_ROOT, 'src', 'baton', 'schema.py'), 'utf8'));
  });
});
