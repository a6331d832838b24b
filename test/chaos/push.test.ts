import http from 'node:http';
import type { Socket } from 'node:net';
import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { useTestDatabase } from '../support/database.js';
import { freePort } from '../support/ports.js';
import { ServerProcess } from '../support/server-process.js';

/**
 * Push delivery under kills: three replicas deliver 5,000 jobs to a receiver while replicas are
 * SIGKILLed mid-delivery (and restarted) and the receiver crashes at random moments (every
 * connection dropped, its port refusing connections for a while), besides answering 1 in 20
 * deliveries with a 500. Every job must complete exactly once
 * in PostgreSQL, and reach the receiver at least once, each repeat with a higher attempt.
 */
const database = useTestDatabase();
const QUEUE = 'push-chaos';
const JOBS = 5000;

describe('push delivery under kills', () => {
  it('5,000 jobs: replicas SIGKILLed mid-delivery and the receiver crashing lose none and complete each once', async () => {
    // The receiver: records every delivery (its job and attempt), answers after a few ms.
    const deliveries = new Map<string, number[]>();
    let crashes = 0;
    const sockets = new Set<Socket>();
    const receiver = http.createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        const id = String(req.headers['baton-job-id']);
        const attempt = Number(req.headers['baton-attempt']);
        deliveries.set(id, [...(deliveries.get(id) ?? []), attempt]);
        setTimeout(() => {
          if (Math.random() < 0.05) {
            res.writeHead(500);
            res.end('flaky');
            return;
          }
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ id }));
        }, Math.random() * 20);
      });
    });
    receiver.on('connection', (s) => {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    const receiverUrl = `http://127.0.0.1:${(receiver.address() as { port: number }).port}/jobs`;

    const env = {
      DATABASE_URL: database.url,
      BATON_PUSH_ALLOW: '127.0.0.1',
      BATON_TICK_MS: '300',
      BATON_PROMOTE_INTERVAL_MS: '200',
      BATON_SHUTDOWN_TIMEOUT_MS: '2000',
      LOG_LEVEL: 'error',
    };
    const ports = await Promise.all([0, 1, 2].map(() => freePort()));
    const servers = await Promise.all(ports.map((port) => ServerProcess.start(env, port)));
    const base = servers[0]!.url;
    const call = (method: string, path: string, body: unknown) =>
      fetch(`${base}${path}`, {
        method,
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });

    let replicaKills = 0;
    let stop = false;
    try {
      // Retries a second after a failed delivery, many of them: nothing dies of the chaos.
      expect(
        (
          await call('PUT', `/v1/queues/${QUEUE}`, {
            max_attempts: 100,
            backoff: { base_ms: 200, max_ms: 1000 },
          })
        ).status,
      ).toBe(201);
      for (let i = 0; i < JOBS; i += 1000) {
        const batch = Array.from({ length: 1000 }, (_, k) => ({ payload: { n: i + k } }));
        expect((await call('POST', `/v1/queues/${QUEUE}/jobs/batch`, { jobs: batch })).status).toBe(201);
      }
      // A timeout of 2 s: a killed replica's leases (timeout + 5 s) run out, and the leader re-arms them.
      expect(
        (
          await call('PUT', `/v1/queues/${QUEUE}/push`, {
            url: receiverUrl,
            timeout_ms: 2000,
            concurrency: 8,
          })
        ).status,
      ).toBe(201);

      const chaos = (async () => {
        while (!stop) {
          await new Promise((r) => setTimeout(r, 1500 + Math.random() * 1500));
          if (stop) break;
          // Turn about: a replica killed, then the receiver crashed, and so on.
          if ((replicaKills + crashes) % 2 === 0) {
            // A replica dies mid-delivery and comes back on its port.
            const i = 1 + Math.floor(Math.random() * 2);
            servers[i]!.signal('SIGKILL');
            await servers[i]!.exited;
            replicaKills++;
            servers[i] = await ServerProcess.start(env, ports[i]!);
          } else {
            // The receiver crashes: every connection dropped, answers in flight lost, and nothing
            // listening on its port (connections refused) until it is back up, 200 to 700 ms later.
            const { port } = receiver.address() as { port: number };
            const closed = new Promise<void>((r) => receiver.close(() => r()));
            for (const s of sockets) s.destroy();
            await closed;
            crashes++;
            await new Promise((r) => setTimeout(r, 200 + Math.random() * 500));
            await new Promise<void>((r) => receiver.listen(port, '127.0.0.1', r));
          }
        }
      })();

      const completed = async () => {
        const { rows } = await sql<{ n: number }>`
          SELECT count(*)::int AS n FROM baton.job_history WHERE queue = ${QUEUE} AND state = 'completed'`.execute(
          database.db,
        );
        return rows[0]!.n;
      };
      const deadline = Date.now() + 240_000;
      while ((await completed()) < JOBS && Date.now() < deadline)
        await new Promise((r) => setTimeout(r, 500));
      stop = true;
      await chaos;

      const { rows: ends } = await sql<{ state: string; n: number; twice: number }>`
        SELECT state, count(*)::int AS n, (count(*) - count(DISTINCT id))::int AS twice
        FROM baton.job_history WHERE queue = ${QUEUE} GROUP BY state`.execute(database.db);
      const { rows: live } = await sql<{ n: number }>`
        SELECT count(*)::int AS n FROM baton.jobs WHERE queue = ${QUEUE}`.execute(database.db);
      const repeats = [...deliveries.values()].filter((a) => a.length > 1);
      console.log(
        `push chaos: ${JOBS} jobs, ${[...deliveries.values()].reduce((n, a) => n + a.length, 0)} deliveries ` +
          `(${repeats.length} jobs delivered more than once), ${replicaKills} replicas SIGKILLed, ` +
          `${crashes} receiver crashes`,
      );
      // Every job completed, once; none left live, none dead.
      expect(ends).toEqual([{ state: 'completed', n: JOBS, twice: 0 }]);
      expect(live[0]!.n).toBe(0);
      // Every job reached the receiver; a repeat always came with a higher attempt.
      expect(deliveries.size).toBe(JOBS);
      for (const attempts of deliveries.values()) {
        expect(attempts).toEqual([...attempts].sort((a, b) => a - b));
        expect(new Set(attempts).size).toBe(attempts.length);
      }
      expect(replicaKills).toBeGreaterThan(0);
      expect(crashes).toBeGreaterThan(0);
    } finally {
      stop = true;
      for (const s of servers) s?.signal('SIGKILL');
      receiver.closeAllConnections();
      receiver.close();
    }
  }, 300_000);
});
