import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import type pg from 'pg';
import type { Config } from '../config.js';
import { createDatabase, type Db } from '../db/database.js';

declare module 'fastify' {
  interface FastifyInstance {
    db: Db;
    /** The pg pool under `db`, for its counts (load shedding, metrics). */
    dbPool: pg.Pool;
  }
}

export interface DatabasePluginOptions {
  url: string;
  config: Config;
}

/** The Kysely instance over one pg pool, shared by routes and background services; closed last. */
export default fp<DatabasePluginOptions>(
  async function database(app: FastifyInstance, opts) {
    const handle = createDatabase(opts.url, opts.config, app.log);
    app.decorate('db', handle.db);
    app.decorate('dbPool', handle.pool);
    app.addHook('onClose', async () => {
      await handle.close();
    });
  },
  { name: 'database', fastify: '5.x' },
);
