import { loadConfig } from '../config.js';

/**
 * The container's health check: GET /healthz where the server listens (HOST and PORT, read as the
 * server reads them), exit 0 on a 200 and 1 otherwise. A wildcard HOST is reached over loopback.
 *
 *   node dist/src/cli/healthcheck.js
 */
let url: string;
try {
  const { host, port } = loadConfig();
  const reachable = host === '0.0.0.0' ? '127.0.0.1' : host === '::' ? '::1' : host;
  url = `http://${reachable.includes(':') ? `[${reachable}]` : reachable}:${port}/healthz`;
} catch (err) {
  console.error((err as Error).message);
  process.exit(1);
}
const healthy = await fetch(url, { signal: AbortSignal.timeout(2500) }).then(
  (res) => res.ok,
  (err: Error) => {
    console.error(`${url}: ${err.message}`);
    return false;
  },
);
process.exit(healthy ? 0 : 1);
