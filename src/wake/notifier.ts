import { sql } from 'kysely';
import type { Db } from '../db/database.js';
import type { Log } from '../logger.js';
import { JOBS_CHANNEL, type JobsNotice, MAX_PAYLOAD_BYTES } from './channel.js';
import type { WaitList } from './wait-list.js';

/** How long a queue stays watched after its last limited claim. */
const SLOT_WATCH_MS = 60_000;

/**
 * Tells waiting claimers that jobs became ready. Waiters in this process are woken at once. Other
 * replicas hear about it through NOTIFY, sent after the write committed (so the jobs are visible
 * when they look) and coalesced: every queue touched within one short window goes out in a single
 * notification, so a busy replica sends a few notifications per second, never one per job or per
 * request. A failed NOTIFY is only logged: waiters on other replicas still poll.
 */
export class Notifier {
  private pending = new Map<string, number>();
  /** Queues to tell the other replicas to watch, with the next notification. */
  private pendingWatch = new Set<string>();
  /** Queues whose claims a limit held back lately, until when (see watchSlots). */
  private readonly limited = new Map<string, number>();
  private timer: NodeJS.Timeout | undefined;
  private inflight: Promise<void> = Promise.resolve();

  constructor(
    private readonly db: Db,
    private readonly waitList: WaitList,
    private readonly replicaId: string,
    private readonly log: Log,
    private readonly windowMs = 2,
  ) {}

  /** `count` jobs became ready in `queue` (committed). */
  jobsReady(queue: string, count: number): void {
    if (count <= 0) return;
    this.waitList.wake(queue, count);
    this.pending.set(queue, (this.pending.get(queue) ?? 0) + count);
    this.timer ??= setTimeout(() => this.flush(), this.windowMs);
  }

  /**
   * A claim of `queue` was held back by a flow-control limit, here or (`fromOtherReplica`) on another
   * replica. For a while after, jobs of the queue leaving `claimed` on this replica wake the queue's
   * waiters, here and on every replica, since they free slots: the first held-back claim of a watch
   * tells the other replicas to watch too, and so does one when the watch is half over. Only such
   * queues pay for it: an ack of any other queue sends nothing.
   */
  watchSlots(queue: string, fromOtherReplica = false): void {
    const now = Date.now();
    const until = this.limited.get(queue);
    this.limited.set(queue, now + SLOT_WATCH_MS);
    if (fromOtherReplica || (until !== undefined && until - now > SLOT_WATCH_MS / 2)) return;
    this.pendingWatch.add(queue);
    this.timer ??= setTimeout(() => this.flush(), this.windowMs);
  }

  /** `count` jobs of `queue` left `claimed` (acked, nacked, cancelled, re-armed): a slot may be free. */
  slotsFreed(queue: string, count: number): void {
    const until = this.limited.get(queue);
    if (until === undefined) return;
    if (until < Date.now()) this.limited.delete(queue);
    else this.jobsReady(queue, count);
  }

  /** Send what is pending now; resolves when sent. */
  flush(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.pending.size === 0 && this.pendingWatch.size === 0) return this.inflight;
    const batches = this.batches();
    this.pending = new Map();
    this.pendingWatch = new Set();
    this.inflight = this.inflight.then(async () => {
      for (const payload of batches) {
        try {
          await sql`SELECT pg_notify(${JOBS_CHANNEL}, ${payload})`.execute(this.db);
        } catch (err) {
          this.log.warn({ err }, 'NOTIFY failed; other replicas will find the jobs by polling');
        }
      }
    });
    return this.inflight;
  }

  private batches(): string[] {
    const out: string[] = [];
    let current: JobsNotice = { r: this.replicaId, q: {} };
    for (const [queue, count] of this.pending) {
      const next = { ...current, q: { ...current.q, [queue]: count } };
      if (Buffer.byteLength(JSON.stringify(next)) > MAX_PAYLOAD_BYTES && Object.keys(current.q).length > 0) {
        out.push(JSON.stringify(current));
        current = { r: this.replicaId, q: { [queue]: count } };
      } else current = next;
    }
    if (Object.keys(current.q).length > 0) out.push(JSON.stringify(current));
    // Queue names are at most 128 characters: a few hundred of them fit in one notice.
    const watch = [...this.pendingWatch];
    for (let i = 0; i < watch.length; i += 40)
      out.push(JSON.stringify({ r: this.replicaId, q: {}, w: watch.slice(i, i + 40) }));
    return out;
  }
}
