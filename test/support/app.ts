import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll } from 'vitest';
import { type BatonApp, buildApp } from '../../src/app.js';
import { type Config, loadConfig } from '../../src/config.js';
import { loadStartupInputs, type StartupInputs } from '../../src/startup-inputs.js';
import type { TestDatabase } from './database.js';

/**
 * Config for tests: quiet logs, no leader election unless a test turns it on, plus overrides. No
 * shedding on event-loop lag unless a test sets it: an in-process app shares its event loop with the
 * test and with the file's other apps, so a lag there says nothing about the app (a test starting
 * four replicas at once lagged a second and got 503s from the first app). No push delivery unless a
 * test turns it on (test/push/): it would read the push endpoints every few seconds in every app.
 */
export function testConfig(env: Record<string, string> = {}): Config {
  return loadConfig({
    LOG_LEVEL: 'silent',
    BATON_MAINTENANCE: 'false',
    BATON_SHED_EVENT_LOOP_DELAY_MS: '0',
    BATON_PUSH: 'false',
    ...env,
  });
}

/**
 * What the server loads before start-up from `env`: config, then the API keys, SQS key pairs and
 * schedules file it names. Throws the ConfigError that would stop start-up.
 */
export function loadStartup(env: Record<string, string>): StartupInputs & { config: Config } {
  const config = loadConfig(env);
  return { config, ...loadStartupInputs(config) };
}

export async function createTestApp(
  database: { url: string },
  env: Record<string, string> = {},
): Promise<BatonApp> {
  const config = testConfig(env);
  const app = await buildApp({ config, databaseUrl: database.url });
  await app.ready();
  return app;
}

/** One app for the whole test file over the file's database; requests go through app.inject. */
export function useTestApp(database: TestDatabase, env: Record<string, string> = {}): BatonApp {
  let app: BatonApp | undefined;
  beforeAll(async () => {
    app = await createTestApp(database, env);
  });
  afterAll(async () => {
    await app?.close();
  });
  return new Proxy({} as BatonApp, {
    get(_, prop) {
      if (!app) throw new Error('test app used before beforeAll ran');
      const value = Reflect.get(app, prop, app);
      return typeof value === 'function' ? value.bind(app) : value;
    },
  });
}

/**
 * `n` apps over one database, as replicas of one deployment, created before the file's tests and
 * closed after them. The array is filled in beforeAll.
 */
export function useTestReplicas(database: TestDatabase, n: number): BatonApp[] {
  const replicas: BatonApp[] = [];
  beforeAll(async () => {
    for (let i = 0; i < n; i++) replicas.push(await createTestApp(database));
  });
  afterAll(async () => {
    await Promise.all(replicas.map((app) => app.close()));
  });
  return replicas;
}

/** Listen on a free loopback port; returns the base URL. */
export async function listen(app: BatonApp): Promise<string> {
  await app.listen({ port: 0, host: '127.0.0.1' });
  return `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
}

/** A useTestApp() app that also listens on a loopback port, for real HTTP clients; `url` is its base URL. */
export function useListeningApp(database: TestDatabase, env: Record<string, string> = {}) {
  const app = useTestApp(database, env);
  let url: string | undefined;
  beforeAll(async () => {
    url = await listen(app);
  });
  return {
    app,
    get url(): string {
      if (!url) throw new Error('server used before beforeAll ran');
      return url;
    },
  };
}
