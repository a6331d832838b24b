import type { Config } from '../config.js';
import type { Db } from '../db/database.js';
import { type Announcement, announceWorker, forgetWorker, listWorkers, workerSeen } from '../jobs/workers.js';
import type { Log } from '../logger.js';

/** How often one replica refreshes a worker's last_seen_at from its claims, at most. */
const SEEN_EVERY_MS = 5_000;
/** Workers one replica remembers having refreshed; past this the memory starts over. */
const SEEN_REMEMBERED = 10_000;

/**
 * Workers that announce themselves (jobs/workers.ts), whichever protocol lists them. A claim naming
 * a worker refreshes when it was last seen, at most every SEEN_EVERY_MS per worker and replica, in
 * a statement of its own after the claim has answered: the claim itself writes nothing more.
 */
export class WorkerUseCases {
  private readonly lastSeen = new Map<string, number>();

  constructor(private readonly deps: { db: Db; log: Log; config: Pick<Config, 'workerSilenceMs'> }) {}

  announce(a: Announcement): Promise<void> {
    return announceWorker(this.deps.db, a);
  }

  forget(owner: string, id: string): Promise<boolean> {
    return forgetWorker(this.deps.db, owner, id);
  }

  list(opts: { patterns?: string[]; queue?: string; limit: number }) {
    return listWorkers(this.deps.db, { ...opts, silenceMs: this.deps.config.workerSilenceMs });
  }

  /** A claim named `id` on `queue`: refresh the worker, unless this replica did a moment ago. */
  seen(id: string, queue: string): void {
    const key = `${queue}\u0000${id}`;
    const now = Date.now();
    if (now - (this.lastSeen.get(key) ?? 0) < SEEN_EVERY_MS) return;
    if (this.lastSeen.size >= SEEN_REMEMBERED) this.lastSeen.clear();
    this.lastSeen.set(key, now);
    workerSeen(this.deps.db, id, queue).catch((err) =>
      this.deps.log.warn({ error: (err as Error).message, worker: id }, 'could not refresh a worker'),
    );
  }
}
