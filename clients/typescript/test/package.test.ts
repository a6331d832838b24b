import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { typesFromDocument } from '../../../openapi/types.js';
import { useListeningApp } from '../../../test/support/app.js';
import { useTestDatabase } from '../../../test/support/database.js';
import { apiKeyEntry, secretOf } from '../../../test/support/keys.js';
import { startWorker } from '../../../test/support/worker-process.js';

/**
 * The package as a user gets it: installed from this folder into a fresh project (a copy, as a
 * registry install would make, holding only what package.json's `files` ships), where the README's
 * `ts run` and `ts worker` blocks are type-checked against its declarations and run with that
 * project's `baton-client`; and the checked-in src/schema.ts and dist/ held to what the generator
 * and the compiler make of today's sources.
 */
const run = promisify(execFile);
const PACKAGE = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const REPO = path.resolve(PACKAGE, '../..');
const BIN = path.join(REPO, 'node_modules', '.bin');
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'baton-ts-pkg-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

const database = useTestDatabase();
const server = useListeningApp(database, {
  BATON_API_KEYS: JSON.stringify([apiKeyEntry('ts-admin', ['admin'])]),
});

/** The README's fenced blocks marked `ts run` (run to the end) and `ts worker` (a process). */
function readmeBlocks(): { kind: 'run' | 'worker'; code: string }[] {
  const readme = fs.readFileSync(path.join(PACKAGE, 'README.md'), 'utf8');
  return [...readme.matchAll(/^```ts (run|worker)\n([\s\S]*?)^```$/gm)].map((m) => ({
    kind: m[1] as 'run' | 'worker',
    code: m[2]!,
  }));
}

/** Every file under `root`, by path relative to it. */
function filesOf(root: string): Map<string, string> {
  const files = new Map<string, string>();
  for (const entry of fs.readdirSync(root, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue;
    const file = path.join(entry.parentPath, entry.name);
    files.set(path.relative(root, file), fs.readFileSync(file, 'utf8'));
  }
  return files;
}

describe('the baton-client package', () => {
  it('installs from its folder into a fresh project, and the README’s code type-checks and runs against Baton as written', async () => {
    const app = path.join(dir, 'app');
    fs.mkdirSync(app);
    fs.writeFileSync(
      path.join(app, 'package.json'),
      JSON.stringify({ name: 'readme-app', private: true, type: 'module' }),
    );
    await run('npm', ['install', '--offline', '--no-audit', '--no-fund', '--install-links', PACKAGE], {
      cwd: app,
    });
    const installed = path.join(app, 'node_modules', 'baton-client');
    expect(fs.lstatSync(installed).isSymbolicLink()).toBe(false);
    expect(fs.existsSync(path.join(installed, 'dist', 'index.js'))).toBe(true);
    expect(fs.existsSync(path.join(installed, 'src'))).toBe(false);

    const blocks = readmeBlocks();
    expect(blocks.filter((b) => b.kind === 'worker')).toHaveLength(1);
    expect(blocks.filter((b) => b.kind === 'run').length).toBeGreaterThanOrEqual(3);
    const files = blocks.map((block, i) => {
      const file = path.join(app, `${block.kind}-${i}.mts`);
      fs.writeFileSync(file, block.code);
      return { ...block, file };
    });

    // As a user's strict project would check them, with the package's own declarations.
    fs.writeFileSync(
      path.join(app, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          target: 'ES2022',
          module: 'NodeNext',
          moduleResolution: 'NodeNext',
          strict: true,
          noEmit: true,
          types: ['node'],
          typeRoots: [path.join(REPO, 'node_modules', '@types')],
        },
        include: ['*.mts'],
      }),
    );
    await run(path.join(BIN, 'tsc'), ['-p', 'tsconfig.json'], { cwd: app }).catch((err) => {
      throw new Error(`the README's code does not type-check:\n${err.stdout}${err.stderr}`);
    });

    // Run with Node's own type stripping, outside this checkout: `baton-client` is the installed copy.
    const env = { BATON_URL: server.url, BATON_API_KEY: secretOf('ts-admin'), NODE_OPTIONS: '' };
    const workers = files
      .filter((f) => f.kind === 'worker')
      .map((f) => startWorker(process.execPath, [f.file], env));
    try {
      for (const block of files.filter((f) => f.kind === 'run')) {
        const { stdout } = await run(process.execPath, [block.file], {
          cwd: app,
          env: { ...process.env, ...env },
        });
        const expected = [...block.code.matchAll(/^\/\/ => (.*)$/gm)].map((m) => m[1]);
        expect(stdout.trimEnd().split('\n'), block.code).toEqual(expected);
      }
      for (const w of workers) w.child.kill('SIGTERM');
      expect(await Promise.all(workers.map((w) => w.exited))).toEqual(workers.map(() => 0));
    } finally {
      for (const w of workers) w.child.kill('SIGKILL');
    }
  }, 120_000);

  it('src/schema.ts is the types openapi-typescript makes of openapi/openapi.json (npm run openapi after an API change)', async () => {
    const document = JSON.parse(fs.readFileSync(path.join(REPO, 'openapi', 'openapi.json'), 'utf8'));
    expect(fs.readFileSync(path.join(PACKAGE, 'src', 'schema.ts'), 'utf8')).toBe(
      await typesFromDocument(document),
    );
  });

  it('dist/ is what the compiler makes of src/ (npm run build after a change)', async () => {
    const out = path.join(dir, 'dist');
    await run(path.join(BIN, 'tsc'), ['-p', path.join(PACKAGE, 'tsconfig.json'), '--outDir', out]);
    const built = filesOf(out);
    const shipped = filesOf(path.join(PACKAGE, 'dist'));
    expect([...shipped.keys()].sort()).toEqual([...built.keys()].sort());
    for (const [file, text] of built) expect(shipped.get(file), `dist/${file}`).toBe(text);
  }, 60_000);
});
