import { ConfigError, loadConfig } from '../config.js';
import { createDatabase } from '../db/database.js';
import { type EmbeddedPostgres, startEmbeddedPostgres } from '../db/embedded-postgres.js';
import { migrateToLatest } from '../db/migrate.js';
import { MIGRATION_NEEDS_DIRECT_URL, migrationTarget } from '../db/pooler.js';
import { createLogger } from '../logger.js';
import { databaseProblem } from '../startup-errors.js';

/**
 * Apply pending migrations to DATABASE_URL (BATON_DIRECT_DATABASE_URL if set; or the embedded
 * database) and exit: `npm run migrate`
 * in a checkout, `node dist/src/cli/migrate.js` (or `npm run migrate:dist`) in the Docker image.
 * A database that does not answer is one line and exit status 1, as at server start-up.
 */
let config: ReturnType<typeof loadConfig>;
try {
  config = loadConfig();
} catch (err) {
  if (!(err instanceof ConfigError)) throw err;
  console.error(err.message);
  process.exit(2);
}
const log = createLogger(config);
let embedded: EmbeddedPostgres | undefined;
if (!config.databaseUrl) {
  embedded = await startEmbeddedPostgres({ dataDir: config.pgdata, port: config.embeddedPgPort, log }).catch(
    (err: Error) => {
      console.error(`could not start the embedded PostgreSQL: ${err.message}`);
      process.exit(1);
    },
  );
}
const target = migrationTarget(config, config.databaseUrl ?? embedded!.url);
if (!target) {
  console.error(`BATON_DB_POOLER=transaction: ${MIGRATION_NEEDS_DIRECT_URL}`);
  process.exit(1);
}
const url = target.url;
const handle = createDatabase(url, { ...config, dbPooler: target.pooler }, log, 'maintenance');
try {
  const { applied } = await migrateToLatest(handle.db);
  log.info({ applied }, applied.length ? 'migrations applied' : 'nothing to apply');
} catch (err) {
  const line = databaseProblem(err, url, config.connectTimeoutMs);
  if (!line) throw err;
  console.error(line);
  process.exitCode = 1;
} finally {
  await handle.close();
  await embedded?.stop();
}
