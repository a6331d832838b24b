import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { BatonApp } from '../../../src/app.js';
import { createTestApp, listen } from '../../../test/support/app.js';
import { apiKeyEntry, secretOf } from '../../../test/support/keys.js';
import { startWorker, type WorkerProcess } from '../../../test/support/worker-process.js';

/**
 * What the Python library's tests share: a real Baton with API keys (admin, producer, consumer),
 * and Python run against it with the library from clients/python/src on its path.
 */

export const PYTHON_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const REPO_ROOT = path.resolve(PYTHON_ROOT, '../..');

export const KEYS = {
  admin: secretOf('py-admin'),
  producer: secretOf('py-producer'),
  consumer: secretOf('py-consumer'),
};

export const SERVER_ENV = {
  BATON_API_KEYS: JSON.stringify([
    apiKeyEntry('py-admin', ['admin']),
    apiKeyEntry('py-producer', ['producer']),
    apiKeyEntry('py-consumer', ['consumer']),
  ]),
  // A leader re-arming expired leases every half second: a lease a worker failed to keep comes back.
  BATON_MAINTENANCE: 'true',
  BATON_TICK_MS: '500',
  BATON_DB_CONNECT_TIMEOUT_MS: '1000',
};

export async function startBaton(
  database: { url: string },
  env: Record<string, string> = {},
): Promise<{ app: BatonApp; url: string }> {
  const app = await createTestApp(database, { ...SERVER_ENV, ...env });
  return { app, url: await listen(app) };
}

/** The environment a Python test or worker gets: where Baton is, the keys, the library's path. */
export function pythonEnv(url: string, env: Record<string, string> = {}): Record<string, string> {
  return {
    BATON_URL: url,
    BATON_API_KEY: KEYS.consumer,
    BATON_ADMIN_KEY: KEYS.admin,
    BATON_PRODUCER_KEY: KEYS.producer,
    BATON_CONSUMER_KEY: KEYS.consumer,
    PYTHONPATH: path.join(PYTHON_ROOT, 'src'),
    PYTHONUNBUFFERED: '1',
    ...env,
  };
}

export interface PythonRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Run python3 (or `python`) with `args` to its end; the output is kept for the assertion message. */
export function runPython(
  args: string[],
  env: Record<string, string>,
  cwd = PYTHON_ROOT,
  python = 'python3',
): Promise<PythonRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(python, args, {
      cwd,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => {
      stdout += chunk;
    });
    child.stderr.on('data', (chunk) => {
      stderr += chunk;
    });
    child.on('error', reject);
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

/** A Python worker script of tests/scripts run as a process, its JSON-line events parsed. */
export function startPythonWorker(script: string, env: Record<string, string>): WorkerProcess {
  return startWorker('python3', [path.join(PYTHON_ROOT, 'tests', 'scripts', script)], env);
}

/** A request as the admin, through the app. */
export async function admin(app: BatonApp, method: 'GET' | 'POST' | 'PUT', url: string, body?: object) {
  const res = await app.inject({
    method,
    url,
    headers: { authorization: `Bearer ${KEYS.admin}` },
    ...(body ? { payload: body } : {}),
  });
  if (res.statusCode >= 300) throw new Error(`${method} ${url}: ${res.statusCode} ${res.body}`);
  return res.json();
}
