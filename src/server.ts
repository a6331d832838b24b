import { buildApp } from './app.js';
import { type Config, ConfigError, loadConfig } from './config.js';
import { createDatabase } from './db/database.js';
import { type EmbeddedPostgres, startEmbeddedPostgres } from './db/embedded-postgres.js';
import { migrateToLatest, pendingMigrations } from './db/migrate.js';
import { MIGRATION_NEEDS_DIRECT_URL, migrationTarget } from './db/pooler.js';
import { compilePending } from './http/lazy-compile.js';
import { createLogger } from './logger.js';
import { databaseProblem, listenProblem, redactUrl } from './startup-errors.js';
import { loadStartupInputs, type StartupInputs, startupWarnings } from './startup-inputs.js';

/**
 * The process: load config and what it names (API keys, SQS key pairs, the schedules file), find
 * the database (embedded when DATABASE_URL is unset), migrate, build the app, listen; on
 * SIGTERM/SIGINT stop accepting, let in-flight requests finish (bounded by BATON_SHUTDOWN_TIMEOUT_MS),
 * stop background work, close the pool, stop the embedded database.
 */
async function main() {
  let config: Config;
  let inputs: StartupInputs;
  try {
    config = loadConfig();
    inputs = loadStartupInputs(config);
  } catch (err) {
    if (err instanceof ConfigError) {
      console.error(err.message);
      process.exit(2);
    }
    throw err;
  }
  const log = createLogger(config);
  for (const warning of startupWarnings(config, inputs)) log.warn({ host: config.host }, warning);

  let embedded: EmbeddedPostgres | undefined;
  // A failure the environment causes (port taken, database away) ends start-up with one line.
  const giveUp = async (line: string | undefined, err: unknown): Promise<never> => {
    await embedded?.stop().catch(() => {});
    if (!line) throw err;
    console.error(line);
    process.exit(1);
  };

  let databaseUrl = config.databaseUrl;
  if (!databaseUrl) {
    embedded = await startEmbeddedPostgres({
      dataDir: config.pgdata,
      port: config.embeddedPgPort,
      log,
    }).catch((err) => giveUp(`could not start the embedded PostgreSQL: ${(err as Error).message}`, err));
    databaseUrl = embedded.url;
  }

  // Which database this is, without its password: the first thing to check when data seems missing.
  log.info(
    { database: redactUrl(databaseUrl) },
    embedded ? 'using the embedded PostgreSQL' : 'using the database DATABASE_URL names',
  );

  if (config.migrateOnStart) {
    // Through a transaction pooler only a schema that is already current is accepted (db/pooler.ts).
    const target = migrationTarget(config, databaseUrl);
    const url = target?.url ?? databaseUrl;
    const handle = createDatabase(
      url,
      { ...config, dbPooler: target?.pooler ?? config.dbPooler },
      log,
      'maintenance',
    );
    try {
      if (target) {
        const { applied } = await migrateToLatest(handle.db);
        log.info({ applied }, applied.length ? 'migrations applied' : 'database schema is current');
      } else {
        const pending = await pendingMigrations(handle.db);
        if (pending.length > 0)
          await giveUp(`${pending.length} migrations to apply, but ${MIGRATION_NEEDS_DIRECT_URL}`, undefined);
        log.info({}, 'database schema is current');
      }
    } catch (err) {
      await giveUp(databaseProblem(err, url, config.connectTimeoutMs), err);
    } finally {
      await handle.close();
    }
  }

  const app = await buildApp({ config, databaseUrl, inputs, logger: log });
  try {
    await app.listen({
      port: config.port,
      host: config.host,
      listenTextResolver: (address) =>
        `Baton is listening: API ${address}, ${config.ui ? `dashboard ${address}/ui, ` : ''}docs ${address}/docs`,
    });
  } catch (err) {
    await app.close().catch(() => {});
    await giveUp(listenProblem(err, config.host, config.port), err);
  }
  // The routes' schemas are compiled when first used (http/lazy-compile.ts); a second after start,
  // those no request has used yet are compiled, a few per turn of the event loop, so requests go
  // between them.
  const compileRest = () => {
    if (compilePending(4) > 0) setImmediate(compileRest);
  };
  setTimeout(compileRest, 1000).unref();

  let stopping = false;
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'shutting down: no new requests, finishing in-flight ones');
    const deadline = setTimeout(() => {
      log.error({ timeoutMs: config.shutdownTimeoutMs }, 'shutdown timed out; exiting anyway');
      process.exit(1);
    }, config.shutdownTimeoutMs + 5000);
    deadline.unref();
    try {
      await app.close();
      await embedded?.stop();
      log.info('stopped');
      process.exit(0);
    } catch (err) {
      log.error({ err }, 'error during shutdown');
      process.exit(1);
    }
  };
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
  process.on('SIGINT', () => void shutdown('SIGINT'));
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
