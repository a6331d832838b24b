import { loadConfig } from '../config.js';
import { createDatabase } from '../db/database.js';
import { startEmbeddedPostgres } from '../db/embedded-postgres.js';
import { migrateToLatest } from '../db/migrate.js';
import { createLogger } from '../logger.js';

/** `npm run migrate`: apply pending migrations to DATABASE_URL (or the embedded database) and exit. */
const config = loadConfig();
const log = createLogger(config);
const embedded = config.databaseUrl
  ? undefined
  : await startEmbeddedPostgres({ dataDir: config.pgdata, port: config.embeddedPgPort, log });
const handle = createDatabase(config.databaseUrl ?? embedded!.url, config, log);
try {
  const { applied } = await migrateToLatest(handle.db);
  log.info({ applied }, applied.length ? 'migrations applied' : 'nothing to apply');
} finally {
  await handle.close();
  await embedded?.stop();
}
