import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { startIdleRelease } from '../memory/idle-release.js';

/** BATON_IDLE_MEMORY_RELEASE_MS: give the heap back once the server has been idle that long. */
export default fp(
  async function idleMemory(app: FastifyInstance) {
    const idleMs = app.config.idleMemoryReleaseMs;
    if (idleMs === 0) return;
    let stop: (() => void) | undefined;
    app.addHook('onReady', async () => {
      stop = startIdleRelease({
        idleMs,
        onRelease: ({ heapBefore, heapAfter, ms }) =>
          app.log.debug(
            {
              heapBeforeMiB: Math.round(heapBefore / 2 ** 20),
              heapAfterMiB: Math.round(heapAfter / 2 ** 20),
              ms,
            },
            'idle: heap released',
          ),
        onError: (err) => app.log.warn({ err }, 'idle: could not release the heap'),
      });
    });
    app.addHook('onClose', async () => stop?.());
  },
  { name: 'idle-memory', fastify: '5.x' },
);
