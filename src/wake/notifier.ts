import { sql } from 'kysely';
import type { Db } from '../db/database.js';
import { logFieldsOf } from '../db/errors.js';
import { type ClaimFloor, ClaimFloors } from '../jobs/claim/floors.js';
import type { Log } from '../logger.js';
import {
  FLOORS_PER_NOTICE,
  IDS_PER_NOTICE,
  JOBS_CHANNEL,
  type JobsNotice,
  MAX_PAYLOAD_BYTES,
} from './channel.js';
import { FinishWaitList } from './finish-wait-list.js';
import type { WaitList } from './wait-list.js';

/** How long a queue stays watched after its last limited claim. */
const SLOT_WATCH_MS = 60_000;
/**
 * An awaited job stays known to the other replicas this much longer than its waiter waits, for the
 * clocks of two processes and a notice on its way.
 */
const AWAIT_SLACK_MS = 2_000;
/** How often the maps of awaited jobs drop entries whose wait is over. */
const AWAIT_SWEEP_MS = 10_000;

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
  /** Jobs a request on another replica awaits (their `a` notices), until when by this replica's clock. */
  private readonly awaitedElsewhere = new Map<string, number>();
  /** Jobs this replica told the others it awaits, until when: not told again while that covers a wait. */
  private readonly announced = new Map<string, number>();
  /** Awaited jobs to tell the other replicas about with the next notification (id → ms). */
  private pendingAwaited = new Map<string, number>();
  /** Finished jobs another replica awaits, for the next notification. */
  private pendingFinished = new Set<string>();
  /** Claim floors for the next notification, and how long they last (publishFloors). */
  private pendingFloors: { floors: Record<string, ClaimFloor>; ttlMs: number } | undefined;
  /**
   * The claim floors in force on this replica: published here (this replica leads) or heard from
   * the leader (Listener). The replica's claims read them (jobs/claim/floors.ts).
   */
  readonly floors = new ClaimFloors();
  /** Told when the next notification has been sent. */
  private afterFlush: (() => void)[] = [];
  private lastSweep = Date.now();
  private timer: NodeJS.Timeout | undefined;
  private inflight: Promise<void> = Promise.resolve();

  constructor(
    private readonly db: Db,
    private readonly waitList: WaitList,
    private readonly replicaId: string,
    private readonly log: Log,
    /** The requests of this replica awaiting jobs' ends (GET /v1/jobs/{id}?wait_ms). */
    readonly finishWaits = new FinishWaitList(),
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

  /**
   * A request on this replica awaits these jobs' ends for at most waitMs. The other replicas are
   * told (one coalesced notice, `a`), so that when one of the jobs finishes there, that replica tells
   * this one (`f`, jobsFinished); resolves once the notice is sent, so the waiter's next read comes
   * after it. A job already announced for at least as long is not announced again. Only jobs someone
   * awaits are ever named in a notification: an ack of any other job sends nothing.
   */
  awaiting(ids: readonly string[], waitMs: number): Promise<void> {
    const now = Date.now();
    this.sweep(now);
    const until = now + waitMs;
    for (const id of ids) {
      if ((this.announced.get(id) ?? 0) >= until) continue;
      this.announced.set(id, until);
      this.pendingAwaited.set(id, Math.max(waitMs, this.pendingAwaited.get(id) ?? 0));
    }
    if (this.pendingAwaited.size === 0) return this.inflight;
    this.timer ??= setTimeout(() => this.flush(), this.windowMs);
    return new Promise((resolve) => this.afterFlush.push(resolve));
  }

  /** Another replica awaits these jobs (its notice's `a`: id → ms). */
  awaitedElsewhereFor(entries: Record<string, number>): void {
    const now = Date.now();
    this.sweep(now);
    for (const [id, ms] of Object.entries(entries)) {
      const until = now + Math.min(Number(ms) || 0, 10 * 60_000) + AWAIT_SLACK_MS;
      if ((this.awaitedElsewhere.get(id) ?? 0) < until) this.awaitedElsewhere.set(id, until);
    }
  }

  /**
   * These jobs finished (committed): this replica's requests awaiting them are woken, and the other
   * replicas are told about those of them that a request there awaits. With nobody awaiting
   * anything, two size checks and nothing else: the ack's hot path pays nothing for the feature.
   */
  jobsFinished(jobs: readonly { id: string }[]): void {
    if (this.awaitedElsewhere.size > 0) {
      const now = Date.now();
      for (const { id } of jobs) {
        const until = this.awaitedElsewhere.get(id);
        if (until === undefined) continue;
        this.awaitedElsewhere.delete(id);
        if (until < now) continue;
        this.pendingFinished.add(id);
        this.timer ??= setTimeout(() => this.flush(), this.windowMs);
      }
    }
    if (!this.finishWaits.empty) this.finishWaits.wake(jobs.map((job) => job.id));
  }

  /**
   * The leader's claim floors of one walk (maintenance/claim-floors.ts): in force here at once, and
   * sent to the other replicas with the next notification.
   */
  publishFloors(floors: Record<string, ClaimFloor>, ttlMs: number): void {
    this.floors.set(floors, ttlMs);
    if (Object.keys(floors).length === 0) return;
    this.pendingFloors = { floors, ttlMs };
    this.timer ??= setTimeout(() => this.flush(), this.windowMs);
  }

  /** Forget awaited jobs whose wait is over, at most every AWAIT_SWEEP_MS. */
  private sweep(now: number): void {
    if (now - this.lastSweep < AWAIT_SWEEP_MS) return;
    this.lastSweep = now;
    for (const map of [this.awaitedElsewhere, this.announced])
      for (const [id, until] of map) if (until < now) map.delete(id);
  }

  /** Send what is pending now; resolves when sent. */
  flush(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    const told = this.afterFlush;
    this.afterFlush = [];
    if (
      this.pending.size === 0 &&
      this.pendingWatch.size === 0 &&
      this.pendingAwaited.size === 0 &&
      this.pendingFinished.size === 0 &&
      this.pendingFloors === undefined
    ) {
      for (const resolve of told) resolve();
      return this.inflight;
    }
    const batches = this.batches();
    this.pending = new Map();
    this.pendingWatch = new Set();
    this.pendingAwaited = new Map();
    this.pendingFinished = new Set();
    this.pendingFloors = undefined;
    this.inflight = this.inflight.then(async () => {
      for (const payload of batches) {
        try {
          await sql`SELECT pg_notify(${JOBS_CHANNEL}, ${payload})`.execute(this.db);
        } catch (err) {
          this.log.warn(logFieldsOf(err), 'NOTIFY failed; other replicas will find the jobs by polling');
        }
      }
      for (const resolve of told) resolve();
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
    const awaited = [...this.pendingAwaited];
    for (let i = 0; i < awaited.length; i += IDS_PER_NOTICE) {
      const a = Object.fromEntries(awaited.slice(i, i + IDS_PER_NOTICE));
      out.push(JSON.stringify({ r: this.replicaId, q: {}, a } satisfies JobsNotice));
    }
    const finished = [...this.pendingFinished];
    for (let i = 0; i < finished.length; i += IDS_PER_NOTICE)
      out.push(JSON.stringify({ r: this.replicaId, q: {}, f: finished.slice(i, i + IDS_PER_NOTICE) }));
    if (this.pendingFloors) {
      const { floors, ttlMs } = this.pendingFloors;
      const entries = Object.entries(floors);
      for (let i = 0; i < entries.length; i += FLOORS_PER_NOTICE) {
        const fl = Object.fromEntries(
          entries
            .slice(i, i + FLOORS_PER_NOTICE)
            .map(([q, f]) => [q, [f.priority, f.runAt] as [number, string]]),
        );
        out.push(JSON.stringify({ r: this.replicaId, q: {}, fl, ft: ttlMs } satisfies JobsNotice));
      }
    }
    return out;
  }
}
