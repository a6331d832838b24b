import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { FailoverPair } from '../../test/support/failover/pair.js';

/**
 * `npm run failover [-- --port 16000] [--async]`: a primary and a standby under pg_auto_failover on
 * this machine (test/support/failover/pair.ts), until Ctrl-C. Prints the DATABASE_URL to start Baton with,
 * and how to fail the pair over meanwhile. Needs Debian's postgresql-15-auto-failover and
 * pg-auto-failover-cli (.ci/run installs them).
 */
const { values } = parseArgs({
  options: {
    port: { type: 'string', default: '16000' },
    async: { type: 'boolean', default: false },
    dir: { type: 'string', default: join(tmpdir(), 'baton-failover') },
  },
});
const pair = await FailoverPair.start({
  dir: values.dir!,
  basePort: Number(values.port),
  synchronous: !values.async,
});
const monitor = join(values.dir!, 'monitor');
const env = `XDG_CONFIG_HOME=${values.dir}/config XDG_DATA_HOME=${values.dir}/data`;
console.log(`primary ${await pair.primary()}, replication ${values.async ? 'asynchronous' : 'synchronous'}

  DATABASE_URL='${pair.url}' npm start

A planned switchover:  runuser -u postgres -- env ${env} pg_autoctl perform switchover --pgdata ${monitor}
The state:             runuser -u postgres -- env ${env} pg_autoctl show state --pgdata ${monitor}
Ctrl-C stops both nodes and the monitor and removes ${values.dir}.`);
const stop = async () => {
  await pair.stop();
  process.exit(0);
};
process.on('SIGINT', stop);
process.on('SIGTERM', stop);
await new Promise(() => {});
