import fs from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

/**
 * Builds the dashboard: ui/src/main.tsx (Preact, uPlot, the generated API client) bundled by esbuild
 * into app.js and app.css, beside index.html and icon.svg. Nothing is fetched from anywhere at run
 * time: the bundle is all the page loads.
 *
 * - `npm run build` writes the files to dist/ui/, which the compiled server serves (production).
 * - Running from source (`npm start`, `npm test`), src/plugins/ui.ts calls buildUi() on the first
 *   request for the dashboard and serves the result from memory, so the page always matches the
 *   source and a fresh clone needs no build step.
 */

const HERE = path.dirname(fileURLToPath(import.meta.url));

/** The dashboard's files by name (index.html is a template: src/plugins/ui.ts fills it in). */
export type UiFiles = Record<string, Uint8Array>;

export async function buildUi(): Promise<UiFiles> {
  const result = await build({
    entryPoints: { app: path.join(HERE, 'src/main.tsx') },
    bundle: true,
    write: false,
    outdir: '/ui',
    format: 'esm',
    target: ['es2022', 'chrome111', 'firefox111', 'safari16.4'],
    jsx: 'automatic',
    jsxImportSource: 'preact',
    minify: true,
    // Licence comments of the bundled libraries (Preact, uPlot, openapi-fetch) stay in the files.
    legalComments: 'eof',
    logLevel: 'silent',
  });
  const files: UiFiles = {};
  for (const out of result.outputFiles) files[path.basename(out.path)] = out.contents;
  for (const name of ['index.html', 'icon.svg']) {
    files[name] = await fs.readFile(path.join(HERE, name));
  }
  return files;
}

/** `tsx ui/build.ts <dir>` (npm run build): write the files into <dir>. */
async function main(outDir: string) {
  const files = await buildUi();
  await fs.mkdir(outDir, { recursive: true });
  for (const [name, contents] of Object.entries(files)) await fs.writeFile(path.join(outDir, name), contents);
  console.log(`wrote ${Object.keys(files).sort().join(', ')} to ${outDir}`);
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  await main(process.argv[2] ?? 'dist/ui');
}
