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
