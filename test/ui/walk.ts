import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, expect } from 'vitest';
import { sha256 } from '../../src/auth/api-keys.js';
import { useListeningApp } from '../support/app.js';
import { launchChromium, watchProblems } from '../support/browser.js';
import { useTestDatabase } from '../support/database.js';

/**
 * What the dashboard walks (dashboard.test.ts, flow-pages.test.ts) share: a real server with API keys
 * and a maintenance leader counting every 200 ms over a real PostgreSQL, headless Chromium, and the
 * API as a worker or an operator's script would call it. `npm run screenshots` sets
 * UPDATE_SCREENSHOTS, and the walks then write their screenshots into docs/screenshots/.
 */
export const SECRETS = {
  ops: 'bk_ops_dashboard_test',
  viewer: 'bk_viewer_dashboard_test',
  renders: 'bk_renders_dashboard_test',
};
const KEYS = JSON.stringify([
  { name: 'ops', sha256: sha256(SECRETS.ops).toString('hex'), scopes: ['admin'] },
  { name: 'viewer', sha256: sha256(SECRETS.viewer).toString('hex'), scopes: ['producer', 'consumer'] },
  // A key limited to queue patterns: it sees only those queues (and their schedules).
  {
    name: 'renders-only',
    sha256: sha256(SECRETS.renders).toString('hex'),
    scopes: ['producer', 'consumer'],
    queues: ['renders*'],
  },
]);

export const XSS = '<script>window.__pwned = 1</script><img src="x" onerror="window.__pwned = 2">';

/** Until `read()` passes the check: pages re-read their figures every 2 s, on a machine shared with other tests. */
export const eventually = <T>(read: () => Promise<T>) => expect.poll(read, { timeout: 15_000 });
/** Each walk step waits on the browser; give it room when the machine is busy. */
export const WALK = { timeout: 90_000 };

export function useDashboard(env: Record<string, string> = {}) {
  const database = useTestDatabase();
  const server = useListeningApp(database, {
    BATON_API_KEYS: KEYS,
    BATON_MAINTENANCE: 'true',
    BATON_TICK_MS: '200',
    ...env,
  });

  let browser: Browser | undefined;
  let shots: string | undefined;
  beforeAll(async () => {
    browser = await launchChromium();
    shots = process.env.UPDATE_SCREENSHOTS
      ? 'docs/screenshots'
      : await fs.mkdtemp(path.join(os.tmpdir(), 'baton-screenshots-'));
  });
  afterAll(async () => {
    await browser?.close();
    if (!process.env.UPDATE_SCREENSHOTS && shots) await fs.rm(shots, { recursive: true, force: true });
  });

  /** The API, as a worker or an operator's script would call it. */
  async function call(key: string, method: string, url: string, body?: unknown) {
    const res = await fetch(`${server.url}${url}`, {
      method,
      headers: {
        authorization: `Bearer ${key}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: res.status, body: (await res.json()) as any };
  }

  async function openPage(viewport = { width: 1280, height: 800 }, colorScheme: 'light' | 'dark' = 'light') {
    if (!browser) throw new Error('openPage() before beforeAll ran');
    const context = await browser.newContext({ viewport, colorScheme });
    const page = await context.newPage();
    return { context, page, problems: watchProblems(page) };
  }

  async function signIn(page: Page, key: string) {
    await page.goto(`${server.url}/`);
    await page.getByLabel('API key').fill(key);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Queues' }).waitFor();
  }

  return {
    database,
    server,
    call,
    asOps: (method: string, url: string, body?: unknown) => call(SECRETS.ops, method, url, body),
    openPage,
    signIn,
    /** Where screenshots go: docs/screenshots/ under `npm run screenshots`, else a temporary directory. */
    shot: (name: string) => path.join(shots!, name),
  };
}
