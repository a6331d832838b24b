import pg from 'pg';
import { logFieldsOf } from '../db/errors.js';
import type { ClaimFloor, ClaimFloors } from '../jobs/claim/floors.js';
import type { Log } from '../logger.js';
import { JOBS_CHANNEL, type JobsNotice } from './channel.js';
import type { FinishWaitList } from './finish-wait-list.js';
import type { WaitList } from './wait-list.js';

/** A floor heard lasts at most this long, whatever its notice says. */
const MAX_FLOOR_TTL_MS = 60_000;

/**
 * Holds one dedicated connection (outside the pool) that LISTENs for other replicas' notices and
 * wakes local waiters. If the connection drops it reconnects with backoff; meanwhile waiters keep
 * polling, so a lost notification costs latency, never a job.
 */
export class Listener {
  private client: pg.Client | undefined;
  private stopped = false;
  private retryMs = 100;
  private timer: NodeJS.Timeout | undefined;
  connected = false;
  /** A parent with children finished or was redriven somewhere (JobsNotice.p): the releaser runs. */
  onParentsFinished: () => void = () => {};

  constructor(
    private readonly clientConfig: pg.ClientConfig,
    private readonly waitList: WaitList,
    private readonly replicaId: string,
    private readonly log: Log,
    /** Another replica's claims of these queues were held back by a limit (JobsNotice.w). */
    private readonly onWatch: (queue: string) => void = () => {},
    /** Requests of this replica awaiting jobs' ends: woken by another replica's `f`. */
    private readonly finishWaits?: FinishWaitList,
    /** A request on another replica awaits these jobs (JobsNotice.a: id → ms). */
    private readonly onAwaited: (entries: Record<string, number>) => void = () => {},
    /** The leader's claim floors (JobsNotice.fl), in force here for `ft` ms. */
    private readonly floors?: ClaimFloors,
  ) {}

  start(): void {
    void this.connect();
  }

  private async connect(): Promise<void> {
    if (this.stopped) return;
    // A session that only listens needs no timeout; one sent at connect is lifted (behind a session
    // pooler none is sent: it would refuse it).
    const client = new pg.Client({
      ...this.clientConfig,
      ...('statement_timeout' in this.clientConfig
        ? { statement_timeout: 0, idle_in_transaction_session_timeout: 0 }
        : {}),
    });
    this.client = client;
    client.on('notification', (msg) => this.onNotice(msg.payload));
    client.on('error', (err) => this.lost(client, err));
    client.on('end', () => this.lost(client));
    try {
      await client.connect();
      await client.query(`LISTEN ${JOBS_CHANNEL}`);
      if (this.stopped) return void client.end().catch(() => {});
      this.connected = true;
      this.retryMs = 100;
      // Anything enqueued while we were not listening is found by the waiters' polling; wake them
      // all once now so they look right away instead of at their next poll.
      this.waitList.wakeEveryone();
      this.finishWaits?.wakeEveryone();
      this.onParentsFinished();
      this.log.info({}, 'listening for job notifications');
    } catch (err) {
      this.lost(client, err as Error);
    }
  }

  private lost(client: pg.Client, err?: Error): void {
    if (client !== this.client) return;
    this.client = undefined;
    const wasConnected = this.connected;
    this.connected = false;
    client.removeAllListeners('end');
    client.end().catch(() => {});
    if (this.stopped) return;
    if (wasConnected) this.log.warn(logFieldsOf(err), 'LISTEN connection lost; reconnecting');
    this.timer = setTimeout(() => void this.connect(), this.retryMs);
    this.retryMs = Math.min(this.retryMs * 2, 5000);
  }

  private onNotice(payload: string | undefined): void {
    if (!payload) return;
    let notice: JobsNotice;
    try {
      notice = JSON.parse(payload);
    } catch {
      return;
    }
    if (notice.r === this.replicaId || typeof notice.q !== 'object' || notice.q === null) return;
    for (const [queue, count] of Object.entries(notice.q)) this.waitList.wake(queue, Number(count) || 1);
    if (Array.isArray(notice.w))
      for (const queue of notice.w) if (typeof queue === 'string') this.onWatch(queue);
    if (notice.a && typeof notice.a === 'object') this.onAwaited(notice.a);
    if (Array.isArray(notice.f)) this.finishWaits?.wake(notice.f.filter((id) => typeof id === 'string'));
    if (notice.p) this.onParentsFinished();
    if (notice.fl && typeof notice.fl === 'object') this.floorsHeard(notice.fl, Number(notice.ft) || 0);
  }

  private floorsHeard(fl: Record<string, [number, string]>, ttlMs: number): void {
    const floors: Record<string, ClaimFloor> = {};
    for (const [queue, floor] of Object.entries(fl)) {
      if (!Array.isArray(floor) || !Number.isInteger(floor[0]) || typeof floor[1] !== 'string') continue;
      floors[queue] = { priority: floor[0], runAt: floor[1] };
    }
    this.floors?.set(floors, Math.min(ttlMs, MAX_FLOOR_TTL_MS));
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    const client = this.client;
    this.client = undefined;
    this.connected = false;
    if (client) {
      client.removeAllListeners('end');
      await client.end().catch(() => {});
    }
  }
}
