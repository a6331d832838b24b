import net from 'node:net';
import Fastify from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { whileConnected } from '../../src/http/claims.js';

/**
 * whileConnected() tells a long-poll, an await or a claim that its client has gone. A client may go
 * before the handler runs (auth, validation and the queue lookup of a job-naming route come first);
 * the response's 'close' has then fired already, and a listener added later never hears it.
 */
const apps: ReturnType<typeof Fastify>[] = [];
afterEach(async () => {
  await Promise.all(apps.splice(0).map((a) => a.close()));
});

/** A route that does `delayMs` of other work first, then waits 1.5 s unless told the client left. */
async function serve(delayMs: number) {
  const app = Fastify();
  apps.push(app);
  let told: (how: 'aborted' | 'timed out') => void;
  const outcome = new Promise<'aborted' | 'timed out'>((resolve) => {
    told = resolve;
  });
  app.get('/wait', async (_request, reply) => {
    await new Promise((r) => setTimeout(r, delayMs));
    return whileConnected(
      reply,
      (signal) =>
        new Promise<string>((resolve) => {
          const timer = setTimeout(() => {
            told('timed out');
            resolve('late');
          }, 1500);
          const onAbort = () => {
            clearTimeout(timer);
            told('aborted');
            resolve('gone');
          };
          if (signal.aborted) onAbort();
          else signal.addEventListener('abort', onAbort);
        }),
    );
  });
  const address = await app.listen({ port: 0, host: '127.0.0.1' });
  return { port: Number(new URL(address).port), outcome };
}

/** Send the request, then drop the connection after `leaveAfterMs`. */
function visitAndLeave(port: number, leaveAfterMs: number) {
  const socket = net.connect(port, '127.0.0.1', () => {
    socket.write('GET /wait HTTP/1.1\r\nHost: localhost\r\n\r\n');
    setTimeout(() => socket.destroy(), leaveAfterMs);
  });
  socket.on('error', () => {});
}

describe('whileConnected', () => {
  it('aborts when the client leaves while the work waits', async () => {
    const { port, outcome } = await serve(0);
    visitAndLeave(port, 100);
    expect(await outcome).toBe('aborted');
  });

  it('starts aborted when the client left before the handler got to it', async () => {
    const { port, outcome } = await serve(300);
    visitAndLeave(port, 20);
    expect(await outcome).toBe('aborted');
  });

  it('does not abort a request whose client stays', async () => {
    const { port, outcome } = await serve(0);
    const answer = fetch(`http://127.0.0.1:${port}/wait`).then((r) => r.text());
    expect(await outcome).toBe('timed out');
    expect(await answer).toBe('late');
  });
});
