import { readFileSync } from 'node:fs';

/**
 * Baton's version: package.json's, found by walking up from this file (src/ when run from source,
 * dist/src/ when built; the image keeps package.json beside dist/). One version, so the API document
 * says what the package does.
 */
export const BATON_VERSION: string = (() => {
  for (let dir = new URL('.', import.meta.url); ; dir = new URL('..', dir)) {
    try {
      const pkg = JSON.parse(readFileSync(new URL('package.json', dir), 'utf8')) as {
        name?: string;
        version?: string;
      };
      if (pkg.name === 'baton' && pkg.version) return pkg.version;
    } catch {
      // No package.json here: look one folder up.
    }
    if (dir.pathname === '/') throw new Error("Baton's package.json was not found above src/version.ts");
  }
})();
