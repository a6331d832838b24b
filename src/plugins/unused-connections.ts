import type { Socket } from 'node:net';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';

/**
 * On close, end the connections that have never sent a byte. Fastify closes idle keep-alive
 * connections, but Node does not count one that never began a request as idle, and waits for it
 * until the keep-alive timeout (72 s by default): Node's fetch opens such a spare connection after
 * an aborted request, and browsers open them ahead of need. Nothing was asked on them, so nothing is
 * lost; a client that writes on one as it closes sees a reset and retries elsewhere.
 */
export default fp(
  async function unusedConnections(app: FastifyInstance) {
    const open = new Set<Socket>();
    app.server.on('connection', (socket: Socket) => {
      open.add(socket);
      socket.once('close', () => open.delete(socket));
    });
    const endUnused = () => {
      for (const socket of open) if (socket.bytesRead === 0) socket.destroy();
    };
    app.addHook('preClose', (done) => {
      // Fastify stops listening right after the preClose hooks: sweep then too, for a connection
      // accepted in between.
      endUnused();
      setImmediate(endUnused);
      done();
    });
  },
  { name: 'unused-connections', fastify: '5.x' },
);
