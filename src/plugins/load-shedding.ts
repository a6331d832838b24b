import { monitorEventLoopDelay } from 'node:perf_hooks';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { isProbe } from '../http/probes.js';
import { ProblemError } from '../http/problem.js';

const SAMPLE_MS = 250;

/**
 * Load shedding: when the event loop lags (CPU saturated) or too many queries wait for a pool
 * connection (the database cannot keep up), new requests are answered at once with 503
 * `unavailable` and Retry-After, instead of queueing up until they time out and take everything
 * down with them. Health checks and /metrics still answer. Thresholds: BATON_SHED_* (0 turns a
 * check off).
 */
export default fp(
  async function loadShedding(app: FastifyInstance) {
    const { shedEventLoopDelayMs, shedPoolWaiting } = app.config;
    const delay = monitorEventLoopDelay({ resolution: 10 });
    delay.enable();
    // The worst lag over the last two sample windows (so a stall is acted on for a moment after it).
    let lagMs = 0;
    let previous = 0;
    const sampler = setInterval(() => {
      const current = delay.max / 1e6;
      lagMs = Math.max(current, previous);
      previous = current;
      delay.reset();
    }, SAMPLE_MS);
    sampler.unref();
    app.addHook('onClose', async () => {
      clearInterval(sampler);
      delay.disable();
    });

    const shed = (reason: string, detail: string) => {
      app.metrics.requestsShed.inc({ reason });
      return new ProblemError('unavailable', `overloaded (${detail}); retry shortly`, {
        retryAfterSeconds: 1,
      });
    };

    // Callback-style (a throw is the hook's error): an async hook costs a promise and a microtask
    // turn on every request.
    app.addHook('onRequest', (request, _reply, done) => {
      // Probes and scrapes must see an overloaded server.
      if (!isProbe(request)) {
        if (shedEventLoopDelayMs > 0 && lagMs > shedEventLoopDelayMs) {
          throw shed('event_loop', `event loop lag ${Math.round(lagMs)} ms`);
        }
        const waiting = app.dbPool.waitingCount;
        if (shedPoolWaiting > 0 && waiting > shedPoolWaiting) {
          throw shed('pool', `${waiting} queries waiting for a database connection`);
        }
      }
      done();
    });
  },
  { name: 'load-shedding', fastify: '5.x', dependencies: ['database', 'metrics'] },
);
