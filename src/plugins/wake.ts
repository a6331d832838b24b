import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { connectionOptions } from '../db/database.js';
import { listenTarget } from '../db/pooler.js';
import { AwaitSlots } from '../wake/await-slots.js';
import { newReplicaId } from '../wake/channel.js';
import { FinishPoll } from '../wake/finish-poll.js';
import { FinishWaitList } from '../wake/finish-wait-list.js';
import { Listener } from '../wake/listener.js';
import { Notifier } from '../wake/notifier.js';
import { WaitList } from '../wake/wait-list.js';

declare module 'fastify' {
  interface FastifyInstance {
    wake: {
      waitList: WaitList;
      finishWaits: FinishWaitList;
      /** The caps on requests awaiting jobs, and what they hold now. */
      awaitSlots: AwaitSlots;
      notifier: Notifier;
      listener: Listener;
      replicaId: string;
    };
  }
}

/**
 * Long-poll wake-ups: the in-process wait lists (claims per queue, awaits per job), the one poll of
 * every awaited job, the NOTIFY sender and the LISTEN connection. On close, waiting claims and awaits
 * return at once (before in-flight requests are awaited), and close waits until every await has read
 * its answer (the database is closed after: a request sent with inject is not awaited by the
 * server's close); then pending notifications are flushed and the LISTEN connection is closed.
 */
export default fp<{ url: string }>(
  async function wake(app: FastifyInstance, opts) {
    const replicaId = newReplicaId();
    const waitList = new WaitList();
    const finishWaits = new FinishWaitList();
    const finishPoll = new FinishPoll(app.db, finishWaits, app.config.pollIntervalMs, app.log);
    const awaitSlots = new AwaitSlots({
      maxWaiters: app.config.awaitMaxWaiters,
      maxWaitersPerKey: app.config.awaitMaxWaitersPerKey,
      maxJobs: app.config.awaitMaxJobs,
      maxJobsPerKey: app.config.awaitMaxJobsPerKey,
    });
    const notifier = new Notifier(app.db, waitList, replicaId, app.log, finishWaits);
    // Behind a transaction pooler, LISTEN needs a connection of its own to PostgreSQL (db/pooler.ts);
    // without one the listener is never started and waiters find other replicas' jobs by polling.
    const target = listenTarget(app.config, opts.url);
    const listener = new Listener(
      connectionOptions(
        target?.url ?? opts.url,
        { ...app.config, dbPooler: target?.pooler },
        'baton-listen',
        'maintenance',
      ),
      waitList,
      replicaId,
      app.log,
      (queue) => notifier.watchSlots(queue, true),
      finishWaits,
      (entries) => notifier.awaitedElsewhereFor(entries),
      notifier.floors,
    );
    if (target) listener.start();
    else
      app.log.info(
        { poll_interval_ms: app.config.pollIntervalMs },
        'no LISTEN connection behind a transaction pooler (BATON_DIRECT_DATABASE_URL unset): jobs enqueued on other replicas are found by polling',
      );
    app.decorate('wake', { waitList, finishWaits, awaitSlots, notifier, listener, replicaId });
    app.addHook('preClose', async () => {
      waitList.close();
      finishWaits.close();
      finishPoll.stop();
      await awaitSlots.drained();
    });
    app.addHook('onClose', async () => {
      await notifier.flush();
      await listener.stop();
    });
  },
  { name: 'wake', fastify: '5.x', dependencies: ['database'] },
);
