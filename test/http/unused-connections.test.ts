import { once } from 'node:events';
import net from 'node:net';
import { expect, it } from 'vitest';
import { createTestApp, listen } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';

/**
 * A connection that never sent a request (Node's fetch opens one after an aborted request; browsers
 * open them ahead of need) must not hold up a stopping server. Before, close() waited for it until
 * the keep-alive timeout: here ten minutes, well past this test's time limit.
 */
const database = useTestDatabase();

it('close() ends connections that never sent a byte, and still answers the request in flight', async () => {
  const app = await createTestApp(database, { BATON_KEEP_ALIVE_TIMEOUT_MS: '600000' });
  const url = new URL(await listen(app));
  const silent = net.connect(Number(url.port), url.hostname);
  await once(silent, 'connect');
  const ended = once(silent, 'close');
  // A long-poll in flight as the server stops: answered, not cut.
  const claim = fetch(`${url.origin}/v1/queues/unused/claim`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ wait_ms: 1000 }),
  });
  await new Promise((resolve) => setTimeout(resolve, 200));
  await app.close();
  await ended;
  expect(silent.bytesRead).toBe(0);
  expect((await claim).status).toBe(200);
}, 20_000);
