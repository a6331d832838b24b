import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { processCpuMs, processRssBytes } from './process-usage.js';

/**
 * A Baton server in its own process (so it never shares an event loop with the load generator),
 * started from the compiled build (`dist/`, as in production) on the same Node binary as the bench.
 */

export const ROOT = resolve(import.meta.dirname, '..');

/**
 * The Node flags of the production start command (package.json `start:dist`, the same as the
 * Dockerfile's): the server is measured as it runs in production (heap sizing: the V8 flags rows of
 * docs/benchmarks.md, "What was tried and what it gave").
 */
export function productionNodeFlags(): string[] {
  // BENCH_NODE_FLAGS replaces them (space-separated; empty for none), to measure what they cost.
  const override = process.env.BENCH_NODE_FLAGS;
  if (override !== undefined) return override.split(/\s+/).filter(Boolean);
  const pkg = JSON.parse(readFileSync(resolve(ROOT, 'package.json'), 'utf8')) as {
    scripts: Record<string, string>;
  };
  const command = pkg.scripts['start:dist'] ?? '';
  return command.split(/\s+/).filter((word) => /^--[a-z-]+=\S+$/.test(word));
}

export interface BatonServerOptions {
  databaseUrl: string;
  /** A checkout holding the build to start (its `dist/`); this one by default. */
  root?: string;
  port: number;
  /** Extra environment (BATON_* settings). */
  env?: Record<string, string>;
  /** Write a V8 CPU profile into this directory when the server exits. */
  cpuProfileDir?: string;
  /** Extra Node options (e.g. --perf-basic-prof-only-functions). */
  nodeOptions?: string[];
}

export class BatonServer {
  private child: ChildProcess | undefined;
  private output = '';
  readonly url: string;

  constructor(private readonly opts: BatonServerOptions) {
    this.url = `http://127.0.0.1:${opts.port}`;
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  async start(): Promise<void> {
    const root = this.opts.root ?? ROOT;
    // The production entry point (the bundle); a build from before there was one, its compiled server.
    const bundle = resolve(root, 'dist/baton.mjs');
    const serverJs = existsSync(bundle) ? bundle : resolve(root, 'dist/src/server.js');
    if (!existsSync(serverJs)) throw new Error(`${serverJs} is missing: run npm run build first`);
    const args = [
      ...productionNodeFlags(),
      ...(this.opts.nodeOptions ?? []),
      ...(this.opts.cpuProfileDir ? ['--cpu-prof', `--cpu-prof-dir=${this.opts.cpuProfileDir}`] : []),
      serverJs,
    ];
    const child = spawn(process.execPath, args, {
      cwd: root,
      env: {
        ...process.env,
        DATABASE_URL: this.opts.databaseUrl,
        PORT: String(this.opts.port),
        HOST: '127.0.0.1',
        LOG_LEVEL: 'warn',
        ...this.opts.env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child = child;
    const keep = (chunk: Buffer) => {
      this.output = (this.output + chunk.toString()).slice(-8000);
    };
    child.stdout!.on('data', keep);
    child.stderr!.on('data', keep);
    const exited = new Promise<never>((_, reject) =>
      child.once('exit', (code) =>
        reject(new Error(`Baton server exited with code ${code} during start-up:\n${this.output}`)),
      ),
    );
    exited.catch(() => {});
    if (await untilReady(this.url, exited)) return;
    await this.stop();
    throw new Error(`Baton server on port ${this.opts.port} was not ready within 30 s:\n${this.output}`);
  }

  /** CPU time (user + system) the server has used so far, in ms. */
  cpuMs(): number {
    return (this.pid && processCpuMs(this.pid)) || 0;
  }

  rssBytes(): number {
    return (this.pid && processRssBytes(this.pid)) || 0;
  }

  /** SIGTERM and wait for exit (the CPU profile, if any, is written on exit). */
  async stop(): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const gone = new Promise<void>((r) => child.once('exit', () => r()));
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
    await gone;
    clearTimeout(timer);
    this.child = undefined;
  }
}

/**
 * Poll `<url>/readyz` every 50 ms for up to 30 s; true once it answers 200. `stopped` (a promise that
 * rejects, say when the process exits) ends the wait early with its error.
 */
export async function untilReady(
  url: string,
  stopped: Promise<never> = new Promise(() => {}),
): Promise<boolean> {
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    const ready = await fetch(`${url}/readyz`)
      .then((r) => r.ok)
      .catch(() => false);
    if (ready) return true;
    await Promise.race([stopped, new Promise((r) => setTimeout(r, 50))]);
  }
  return false;
}
