import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import type pg from 'pg';
import type { Config } from '../config.js';
import { createDatabase, type Db } from '../db/database.js';
import { checkSessionSettings } from '../db/session-settings.js';

declare module 'fastify' {
  interface FastifyInstance {
    db: Db;
    /** The pg pool under `db`, for its counts (load shedding, metrics). */
    dbPool: pg.Pool;
    /** The leader's own small pool (see PoolRole in db/database.ts); undefined with BATON_MAINTENANCE off. */
    maintenanceDb: Db | undefined;
    /**
     * One connection for the leader election alone, so a renewal never waits for a duty's statement
     * to give a connection back (maintenance/leadership.ts); undefined with BATON_MAINTENANCE off.
     */
    electionDb: Db | undefined;
    /**
     * One connection for the releaser (maintenance/releaser.ts), on every replica: a release never
     * waits behind requests for a connection, and requests never wait behind a release, however
     * large the fan-out it works through.
     */
    releaseDb: Db;
  }
}

/** Connections of the leader's pool: its duties run on their own timers, a few at a time. */
const MAINTENANCE_POOL_SIZE = 4;

export interface DatabasePluginOptions {
  url: string;
  config: Config;
}

/**
 * The Kysely instance over the request pool, shared by the routes; and, on a replica that takes part
 * in maintenance, a second small pool for the leader's duties, planned differently (db/database.ts).
 * Closed last.
 */
export default fp<DatabasePluginOptions>(
  async function database(app: FastifyInstance, opts) {
    const handle = createDatabase(opts.url, opts.config, app.log, 'requests');
    const maintenance = opts.config.maintenance
      ? createDatabase(opts.url, { ...opts.config, poolSize: MAINTENANCE_POOL_SIZE }, app.log, 'maintenance')
      : undefined;
    const election = opts.config.maintenance
      ? createDatabase(opts.url, { ...opts.config, poolSize: 1 }, app.log, 'maintenance')
      : undefined;
    const release = createDatabase(opts.url, { ...opts.config, poolSize: 1 }, app.log, 'maintenance');
    app.decorate('db', handle.db);
    app.decorate('dbPool', handle.pool);
    app.decorate('maintenanceDb', maintenance?.db);
    app.decorate('electionDb', election?.db);
    app.decorate('releaseDb', release.db);
    app.addHook('onClose', async () => {
      await Promise.all([handle.close(), maintenance?.close(), election?.close(), release.close()]);
    });
    app.addHook('onReady', async () => {
      const check = await checkSessionSettings(handle.db, opts.config).catch(() => undefined);
      if (!check) return; // the database is away: requests say so, with 503s
      const timeouts = Object.fromEntries(check.settings.map((s) => [`${s.name}_ms`, s.hasMs]));
      if (check.fix.length === 0) {
        app.log.info(
          { ...timeouts, from: opts.config.dbPooler === 'transaction' ? 'role settings' : 'connection' },
          'database session timeouts hold',
        );
      } else {
        app.log.warn(
          { ...timeouts, wanted_ms: opts.config.statementTimeoutMs, fix: check.fix },
          opts.config.dbPooler === 'transaction'
            ? "database session timeouts are not the role's settings, so a stuck statement or an open transaction is not bounded; run the statements in `fix` (docs/configuration.md)"
            : 'database session timeouts sent at connect were not applied (a pooler dropping them?); set BATON_DB_POOLER, or run the statements in `fix` (docs/configuration.md)',
        );
      }
    });
  },
  { name: 'database', fastify: '5.x' },
);
