import { sql } from 'kysely';
import type { Db } from '../db/database.js';
import type { Log } from '../logger.js';
import { JOBS_CHANNEL, type JobsNotice, MAX_PAYLOAD_BYTES } from './channel.js';
import type { WaitList } from './wait-list.js';

/**
 * Tells waiting claimers that jobs became ready. Waiters in this process are woken at once. Other
 * replicas hear about it through NOTIFY, sent after the write committed (so the jobs are visible
 * when they look) and coalesced: every queue touched within one short window goes out in a single
 * notification, so a busy replica sends a few notifications per second, never one per job or per
 * request. A failed NOTIFY is only logged: waiters on other replicas still poll.
 */
export class Notifier {
  private pending = new Map<string, number>();
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

  /** Send what is pending now; resolves when sent. */
  flush(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.pending.size === 0) return this.inflight;
    const batches = this.batches();
    this.pending = new Map();
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
    return out;
  }
}
