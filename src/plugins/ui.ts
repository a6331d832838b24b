import { createHash } from 'node:crypto';
import fs from 'node:fs';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { ProblemError } from '../http/problem.js';

/**
 * The dashboard at /ui (BATON_UI): a fixed set of static files, built from ui/ (see ui/build.ts).
 * They hold no data; the page calls the public API with the key the operator types in, so it can
 * do exactly what that key can. docs/security.md says how it resists XSS and CSRF.
 *
 * Compiled (dist/), the server serves the files `npm run build` wrote to dist/ui/. Run from source
 * (`npm start`, tests), it builds them from ui/ on the first request and keeps them in memory.
 */

type Files = Record<string, Uint8Array>;

const TYPES: Record<string, string> = {
  'index.html': 'text/html; charset=utf-8',
  'app.js': 'text/javascript; charset=utf-8',
  'app.css': 'text/css; charset=utf-8',
  'icon.svg': 'image/svg+xml',
};

/**
 * Headers of every dashboard file. The policy allows only the page's own script, style and images,
 * and requests to this server: no inline script or style, no eval, no other origin, no framing.
 */
export const UI_HEADERS: Readonly<Record<string, string>> = {
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-resource-policy': 'same-origin',
  // Revalidate every time (cheap: the ETag answers 304), so a new deployment is seen at once.
  'cache-control': 'no-cache',
};

const FROM_SOURCE = import.meta.url.endsWith('.ts');
let sourceBuild: Promise<Files> | undefined;

/** Build from ui/ once per process (from source only). A failed build is retried on the next request. */
function buildFromSource(): Promise<Files> {
  // A variable specifier, so that tsc does not compile the builder (and esbuild, a devDependency)
  // into dist/.
  const builder = '../../ui/build.ts';
  sourceBuild ??= import(builder)
    .then((m: { buildUi: () => Promise<Files> }) => m.buildUi())
    .catch((err) => {
      sourceBuild = undefined;
      throw err;
    });
  return sourceBuild;
}

/**
 * dist/ui/, as `npm run build` wrote it; undefined when it was not built. It is beside the bundled
 * server (dist/baton.mjs) and two folders up from this file compiled alone (dist/src/plugins/ui.js).
 */
function filesFromDist(): Files | undefined {
  for (const dir of [new URL('./ui/', import.meta.url), new URL('../../ui/', import.meta.url)]) {
    try {
      return Object.fromEntries(
        Object.keys(TYPES).map((name) => [name, fs.readFileSync(new URL(name, dir))]),
      );
    } catch {}
  }
  return undefined;
}

interface Asset {
  body: Buffer;
  etag: string;
}

export interface UiPluginOptions {
  /** Whether API keys are configured, so the page asks for one. */
  keysRequired: boolean;
}

export default fp<UiPluginOptions>(
  async function ui(app: FastifyInstance, opts) {
    if (!app.config.ui) return;
    // The page needs to know whether to ask for a key, and how often the leader recounts.
    const template = {
      auth: opts.keysRequired ? 'required' : 'off',
      refreshMs: String(Math.max(2000, app.config.tickMs)),
    };
    const built = FROM_SOURCE ? undefined : filesFromDist();
    if (!FROM_SOURCE && !built) {
      app.log.warn('the dashboard was not built (no dist/ui/): /ui answers 404 until `npm run build` is run');
    }

    let assets: Promise<Map<string, Asset>> | undefined;
    const load = async (): Promise<Map<string, Asset>> => {
      const files = built ?? (FROM_SOURCE ? await buildFromSource() : undefined);
      if (!files) throw new ProblemError('not_found', 'the dashboard was not built: run `npm run build`');
      const out = new Map<string, Asset>();
      for (const [name, contents] of Object.entries(files)) {
        let body = Buffer.from(contents);
        if (name === 'index.html') {
          body = Buffer.from(
            body.toString('utf8').replace(/\{\{(\w+)\}\}/g, (_, k: keyof typeof template) => template[k]),
          );
        }
        const etag = `"${createHash('sha256').update(body).digest('base64url').slice(0, 22)}"`;
        out.set(name, { body, etag });
      }
      return out;
    };

    const serve = (name: string) => async (request: FastifyRequest, reply: FastifyReply) => {
      assets ??= load().catch((err) => {
        assets = undefined;
        throw err;
      });
      const asset = (await assets).get(name);
      if (!asset) throw new ProblemError('not_found', `the dashboard has no file ${name}`);
      reply.headers(UI_HEADERS).header('etag', asset.etag);
      if (request.headers['if-none-match'] === asset.etag) return reply.code(304).send();
      return reply.type(TYPES[name]!).send(asset.body);
    };

    const route = { schema: { hide: true }, config: { access: { endpoint: 'ui' as const } } };
    app.get('/ui', route, serve('index.html'));
    for (const name of Object.keys(TYPES)) {
      if (name !== 'index.html') app.get(`/ui/${name}`, route, serve(name));
    }
  },
  { name: 'ui', fastify: '5.x', dependencies: ['auth'] },
);
