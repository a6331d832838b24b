import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { useTestDatabase } from '../../../test/support/database.js';
import { Client, verifyPushSignature } from '../src/index.js';
import { admin, KEYS, useBaton } from './harness.js';

/**
 * verifyPushSignature against real pushes: a receiver that checks each one with the library, fed
 * by a Baton delivering a push queue (docs/push.md).
 */
const database = useTestDatabase();
const baton = useBaton(database, { BATON_PUSH: 'true', BATON_PUSH_ALLOW: '127.0.0.1' });
const seen: { header: string; body: string }[] = [];
let secret = '';
const receiver = http.createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const body = Buffer.concat(chunks).toString('utf8');
    const header = String(req.headers['baton-signature']);
    seen.push({ header, body });
    const ok = verifyPushSignature(req.headers['baton-signature'], body, secret);
    res.writeHead(ok ? 200 : 401, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ verified: ok }));
  });
});
afterAll(() => receiver.close());

describe('verifyPushSignature', () => {
  it("passes Baton's pushes; a changed body, another secret or an old time fails", async () => {
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/jobs`;
    secret = (await admin(baton.app, 'PUT', '/v1/queues/ts-push/push', { url })).secret;
    const client = new Client({ url: baton.url, apiKey: KEYS.producer });
    try {
      const job = await client.enqueue('ts-push', { to: 'ada@example.com' });
      const done = await client.await(job.id, { timeoutMs: 10_000 });
      expect(done).toMatchObject({ state: 'completed', result: { verified: true } });
    } finally {
      client.close();
    }
    const [{ header, body }] = seen as [{ header: string; body: string }];
    expect(verifyPushSignature(header, Buffer.from(body), ['bps_old', secret])).toBe(true);
    expect(verifyPushSignature(header, `${body} `, secret)).toBe(false);
    expect(verifyPushSignature(header, body, 'bps_another')).toBe(false);
    expect(verifyPushSignature(header, body, secret, { now: new Date(Date.now() + 600_000) })).toBe(false);
    expect(verifyPushSignature(undefined, body, secret)).toBe(false);
  });
});
