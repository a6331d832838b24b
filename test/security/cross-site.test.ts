import { describe, expect, it } from 'vitest';
import { useTestApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';

const database = useTestDatabase();
// No keys: the case where nothing but this check stops a page of another site (see plugins/auth.ts).
const app = useTestApp(database);

const send = (method: 'GET' | 'POST' | 'PUT' | 'DELETE', url: string, site?: string) =>
  app.inject({ method, url, headers: site === undefined ? {} : { 'sec-fetch-site': site } });

describe('requests a browser marks as coming from another site', () => {
  it('may not change anything, by any method', async () => {
    await app.inject({ method: 'PUT', url: '/v1/queues/xs', payload: {} });
    for (const site of ['cross-site', 'same-site']) {
      for (const [method, url] of [
        ['POST', '/v1/queues/xs/pause'],
        ['POST', '/v1/queues/xs/purge'],
        ['PUT', '/v1/queues/xs'],
        ['DELETE', '/v1/queues/xs'],
      ] as const) {
        const res = await send(method, url, site);
        expect(res.statusCode, `${method} ${url} from ${site}`).toBe(403);
        expect(res.json().code).toBe('forbidden');
        expect(res.json().detail).toContain(`Sec-Fetch-Site: ${site}`);
      }
    }
    expect((await send('GET', '/v1/queues/xs')).json().paused).toBe(false);
  });

  it('the dashboard’s own calls (same-origin), a typed-in address (none) and tools that send no label pass', async () => {
    expect((await send('POST', '/v1/queues/xs/pause', 'same-origin')).statusCode).toBe(200);
    expect((await send('POST', '/v1/queues/xs/resume', 'none')).statusCode).toBe(200);
    expect((await send('POST', '/v1/queues/xs/pause')).statusCode).toBe(200);
  });

  it('reads are not refused (another site cannot read the answers without CORS, which Baton does not send)', async () => {
    const res = await send('GET', '/v1/queues/xs', 'cross-site');
    expect(res.statusCode).toBe(200);
    expect(res.headers['access-control-allow-origin']).toBeUndefined();
  });
});

describe('writes whose Origin is not this server (browsers without Sec-Fetch-Site send Origin on a POST)', () => {
  const write = (headers: Record<string, string>, method: 'POST' | 'PUT' | 'DELETE' = 'POST') =>
    app.inject({
      method,
      url: method === 'POST' ? '/v1/queues/xo/pause' : '/v1/queues/xo',
      headers,
      ...(method === 'PUT' ? { payload: {} } : {}),
    });
  const paused = async () => (await app.inject({ method: 'GET', url: '/v1/queues/xo' })).json().paused;

  it('another host, another port, Origin: null or an origin that is no http(s) URL is refused (403 forbidden), by any method', async () => {
    await app.inject({ method: 'PUT', url: '/v1/queues/xo', payload: {} });
    for (const [origin, host] of [
      ['http://evil.example', 'localhost:8080'],
      ['http://localhost:8081', 'localhost:8080'],
      ['https://baton.example.com', 'baton.example.com:8443'],
      // A look-alike: the port is not part of the name.
      ['http://localhost:8080.evil.example', 'localhost:8080'],
      ['null', 'localhost:8080'],
      ['not a url', 'localhost:8080'],
      ['file:///etc/passwd', 'localhost:8080'],
    ]) {
      for (const method of ['POST', 'PUT', 'DELETE'] as const) {
        const res = await write({ origin: origin!, host: host! }, method);
        expect(res.statusCode, `${method} from ${origin} to ${host}`).toBe(403);
        expect(res.json().code).toBe('forbidden');
        expect(res.json().detail).toContain('Origin:');
      }
    }
    expect(await paused()).toBe(false);
  });

  it('the same host and port passes, as the dashboard sends it; behind a TLS proxy too', async () => {
    for (const [origin, host, forwarded] of [
      ['http://localhost:8080', 'localhost:8080'],
      ['http://LocalHost:8080', 'localhost:8080'],
      ['http://127.0.0.1', '127.0.0.1:80'],
      ['http://[::1]:8080', '[::1]:8080'],
      // TLS ends at a proxy: the page is https, Baton sees http; host and port are what count.
      ['https://baton.example.com', 'baton.example.com'],
      ['https://baton.example.com', 'baton.example.com:443'],
      // A proxy that rewrites Host names the browser's host in X-Forwarded-Host.
      ['https://baton.example.com', '127.0.0.1:8080', 'baton.example.com'],
      ['https://baton.example.com', '127.0.0.1:8080', 'baton.example.com, inner.proxy'],
    ]) {
      const headers: Record<string, string> = { origin: origin!, host: host! };
      if (forwarded) headers['x-forwarded-host'] = forwarded;
      const res = await write(headers);
      expect(res.statusCode, `${origin} to ${host} (${forwarded})`).toBe(200);
    }
    // No Origin (curl and other tools) and reads from anywhere pass as before.
    expect((await write({ host: 'localhost:8080' })).statusCode).toBe(200);
    const read = await app.inject({
      method: 'GET',
      url: '/v1/queues/xo',
      headers: { origin: 'http://evil.example' },
    });
    expect(read.statusCode).toBe(200);
  });

  it('a proxy that rewrites Host without X-Forwarded-Host gets a 403 that says what to send', async () => {
    const res = await write({ origin: 'https://baton.example.com', host: '127.0.0.1:8080' });
    expect(res.statusCode).toBe(403);
    expect(res.json().detail).toContain('X-Forwarded-Host');
  });
});
