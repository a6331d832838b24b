import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { sha256 } from '../../src/auth/api-keys.js';
import { createTestApp, useTestApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';

const database = useTestDatabase();
const app = useTestApp(database);
const KEYS = JSON.stringify([
  { name: 'ops', sha256: sha256('ops-secret').toString('hex'), scopes: ['admin'] },
]);

describe('the dashboard’s files', () => {
  it('/ leads to /ui, which is one page with a strict content security policy', async () => {
    const root = await app.inject({ method: 'GET', url: '/' });
    expect(root.statusCode).toBe(302);
    expect(root.headers.location).toBe('/ui');

    const page = await app.inject({ method: 'GET', url: '/ui' });
    expect(page.statusCode).toBe(200);
    expect(page.headers['content-type']).toBe('text/html; charset=utf-8');
    const csp = String(page.headers['content-security-policy']);
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("script-src 'self';");
    expect(csp).toContain("connect-src 'self'");
    expect(csp).toContain("frame-ancestors 'none'");
    expect(csp).not.toMatch(/unsafe-inline|unsafe-eval/);
    expect(page.headers['x-content-type-options']).toBe('nosniff');
    expect(page.headers['x-frame-options']).toBe('DENY');
    // Every script and style is a file of its own: the policy allows nothing inline.
    expect(page.body).toContain('<script type="module" src="/ui/app.js"></script>');
    expect(page.body).not.toMatch(/<script>|<style|\sstyle=|\son[a-z]+=/i);
    // No keys configured here: the page is told not to ask for one.
    expect(page.body).toContain('<meta name="baton-auth" content="off">');
    expect((await app.inject({ method: 'GET', url: '/ui/' })).statusCode).toBe(200);
  });

  it('serves the bundle, its style and its icon with the same headers, and 304 when unchanged', async () => {
    for (const [file, type] of [
      ['app.js', 'text/javascript; charset=utf-8'],
      ['app.css', 'text/css; charset=utf-8'],
      ['icon.svg', 'image/svg+xml'],
    ]) {
      const res = await app.inject({ method: 'GET', url: `/ui/${file}` });
      expect(res.statusCode, file).toBe(200);
      expect(res.headers['content-type']).toBe(type);
      expect(res.headers['content-security-policy']).toContain("default-src 'none'");
      const again = await app.inject({
        method: 'GET',
        url: `/ui/${file}`,
        headers: { 'if-none-match': String(res.headers.etag) },
      });
      expect(again.statusCode).toBe(304);
    }
    const js = (await app.inject({ method: 'GET', url: '/ui/app.js' })).body;
    // Built from ui/src: the generated client's paths are in it; nothing is loaded from elsewhere.
    expect(js).toContain('/v1/queues/{queue}/history');
    expect(js).not.toMatch(/https?:\/\/(?!www\.w3\.org)[a-z]/i);
    expect((await app.inject({ method: 'GET', url: '/ui/other.js' })).statusCode).toBe(404);
    expect((await app.inject({ method: 'GET', url: '/ui/../package.json' })).statusCode).toBe(404);
  });

  it('are open when every other endpoint needs a key, and tell the page to ask for one', async () => {
    const keyed = await createTestApp(database, { BATON_API_KEYS: KEYS, BATON_OPEN_ENDPOINTS: 'none' });
    try {
      for (const url of ['/', '/ui', '/ui/app.js', '/ui/app.css', '/ui/icon.svg']) {
        expect((await keyed.inject({ method: 'GET', url })).statusCode, url).toBeLessThan(400);
      }
      expect((await keyed.inject({ method: 'GET', url: '/ui' })).body).toContain(
        '<meta name="baton-auth" content="required">',
      );
      expect((await keyed.inject({ method: 'GET', url: '/v1/queues' })).statusCode).toBe(401);
      expect((await keyed.inject({ method: 'GET', url: '/docs/' })).statusCode).toBe(401);
    } finally {
      await keyed.close();
    }
  });

  it('BATON_UI=false: no /ui, and / leads to /docs', async () => {
    const off = await createTestApp(database, { BATON_UI: 'false' });
    try {
      expect((await off.inject({ method: 'GET', url: '/ui' })).statusCode).toBe(404);
      expect((await off.inject({ method: 'GET', url: '/ui/app.js' })).statusCode).toBe(404);
      const root = await off.inject({ method: 'GET', url: '/' });
      expect(root.headers.location).toBe('/docs');
    } finally {
      await off.close();
    }
  });
});

describe('the dashboard’s source', () => {
  const files = fs
    .readdirSync('ui/src', { recursive: true, withFileTypes: true })
    .filter((f) => f.isFile() && /\.tsx?$/.test(f.name))
    .map((f) => path.join(f.parentPath, f.name));

  it('never turns a string into markup or code', () => {
    expect(files.length).toBeGreaterThan(10);
    for (const file of files) {
      const text = fs.readFileSync(file, 'utf8');
      expect(text, file).not.toMatch(
        /dangerouslySetInnerHTML|innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function|setAttribute\(\s*['"]on/,
      );
    }
  });

  it('keeps the key out of URLs and cookies: only key-store.ts touches storage, only api.ts sends it', () => {
    for (const file of files) {
      const text = fs.readFileSync(file, 'utf8');
      expect(text, file).not.toMatch(/document\.cookie|localStorage\./);
      if (!file.endsWith('key-store.ts')) expect(text, file).not.toMatch(/sessionStorage\./);
      if (!file.endsWith('api.ts')) expect(text, file).not.toMatch(/authorization\s*:\s*`Bearer/i);
    }
  });
});
