import { sql } from 'kysely';
import type { Db } from '../db/database.js';
import { isLockTimeout } from '../db/errors.js';
import { RING_SLOTS } from '../jobs/ring.js';
import type { Log } from '../logger.js';
import type { Metrics } from '../metrics/metrics.js';
import type { Duty } from './duty.js';

/**
 * The ring: empty the slots of baton.jobs that ids have moved past, with TRUNCATE (jobs/ring.ts,
 * migrations/0004_storage_ring.ts).
 *
 * Claims and acks leave a dead row version and a dead ready-index entry per job. Vacuum removes them
 * only while no transaction in the database is older than they are; TRUNCATE removes a partition
 * whatever transactions are open. So each pass, for every sealed slot (any but the one ids are
 * drawn in now) that still has pages:
 * 1. a slot with ready jobs left (a backlog) is left to the claims, which drain it oldest first;
 * 2. claimed jobs that have been running for `carryAfterMs` are carried to the current slot (an
 *    UPDATE of the partition key: the lease and its token go with the row; an ack waiting for the
 *    row meanwhile gets 40001 and runs again, see jobs/ring.ts). FOR UPDATE SKIP LOCKED: a job a
 *    worker is acking or renewing right now is left for the next pass;
 * 3. once the slot holds no row, it is truncated in one transaction under `lock_timeout`: lock the
 *    partition ACCESS EXCLUSIVE, check again that it is empty (a job inserted into it a moment ago,
 *    by a slow enqueue or a promotion, is seen now and keeps the slot), TRUNCATE. A lock timeout in
 *    any of these statements rolls the attempt back whole and is reported `blocked`, never an error;
 *    claims wait at most that long behind the lock. A slot on which a transaction open for a second
 *    or more holds a lock (a reader of baton.jobs) is reported `blocked` without trying: its LOCK
 *    could only time out, and while it waited, every claim, enqueue and ack of the slot waited behind
 *    it (docs/adr/0013-claims-under-readers.md).
 *
 * Two leaders at once are harmless: the carry skips locked rows, and the truncation re-checks under
 * its lock. Everything is bounded per pass: a slot's carry moves at most `carryBatch` jobs.
 */

export interface RingResult {
  /** The slot new ids go into. */
  current: number;
  truncated: number[];
  /** Jobs carried to the current slot. */
  carried: number;
  /** Sealed slots left alone this pass: ready jobs left, or jobs claimed too recently to carry. */
  busy: number;
  /** Truncations that timed out waiting for their lock (rolled back; tried again next pass). */
  blocked: number;
  /** Slots holding pages after this pass (the current one included). */
  inUse: number;
}

export interface RingOptions {
  lockTimeoutMs: number;
  carryAfterMs: number;
  carryBatch: number;
}

const partition = (slot: number) => sql.table(`baton.jobs_${slot}`);

export async function maintainRing(db: Db, opts: RingOptions): Promise<RingResult> {
  const { rows } = await sql<{ current: number; sizes: string[] }>`
    SELECT baton.job_slot(last_value) AS current,
           ARRAY(SELECT pg_relation_size(format('baton.jobs_%s', s)::regclass)::text
                 FROM generate_series(0, ${RING_SLOTS - 1}) s ORDER BY s) AS sizes
    FROM baton.jobs_id_seq`.execute(db);
  const { current, sizes } = rows[0]!;
  const held = await slotsHeldOpen(db);
  const result: RingResult = { current, truncated: [], carried: 0, busy: 0, blocked: 0, inUse: 0 };
  for (let slot = 0; slot < RING_SLOTS; slot++) {
    if (Number(sizes[slot]) === 0) continue;
    if (slot === current) {
      result.inUse++;
      continue;
    }
    const outcome = await emptySlot(db, slot, current, opts, held.has(slot));
    result.carried += outcome.carried;
    if (outcome.state === 'truncated') result.truncated.push(slot);
    else {
      result.inUse++;
      if (outcome.state === 'blocked') result.blocked++;
      else result.busy++;
    }
  }
  return result;
}

async function emptySlot(
  db: Db,
  slot: number,
  current: number,
  opts: RingOptions,
  heldOpen: boolean,
): Promise<{ state: 'truncated' | 'busy' | 'blocked'; carried: number }> {
  const ready = await sql`SELECT 1 FROM ${partition(slot)} WHERE state = 'ready' LIMIT 1`.execute(db);
  if (ready.rows.length > 0) return { state: 'busy', carried: 0 };

  const carried = await sql`
    WITH picked AS (
      SELECT id FROM ${partition(slot)}
      WHERE state = 'claimed' AND claimed_at < clock_timestamp() - ${opts.carryAfterMs}::integer * interval '1 millisecond'
      LIMIT ${opts.carryBatch}
      FOR UPDATE SKIP LOCKED
    )
    UPDATE baton.jobs j SET slot = ${current}::smallint
    FROM picked p WHERE j.slot = ${slot}::smallint AND j.id = p.id`.execute(db);
  const moved = Number(carried.numAffectedRows ?? 0);

  const left = await sql`SELECT 1 FROM ${partition(slot)} LIMIT 1`.execute(db);
  if (left.rows.length > 0) return { state: 'busy', carried: moved };
  // A transaction open for a while holds a lock on the slot (a reader of baton.jobs): the LOCK below
  // would wait out its lock_timeout, and every claim, enqueue and ack touching the slot would queue
  // behind it meanwhile. Blocked, without asking.
  if (heldOpen) return { state: 'blocked', carried: moved };

  try {
    const truncated = await db.transaction().execute(async (trx) => {
      await sql`SELECT set_config('lock_timeout', ${`${opts.lockTimeoutMs}ms`}, true)`.execute(trx);
      await sql`LOCK TABLE ${partition(slot)} IN ACCESS EXCLUSIVE MODE`.execute(trx);
      // Under the lock, this sees every row committed before it: a slow enqueue or a promotion into
      // this slot keeps it.
      const again = await sql`SELECT 1 FROM ${partition(slot)} LIMIT 1`.execute(trx);
      if (again.rows.length > 0) return false;
      await sql`TRUNCATE ${partition(slot)}`.execute(trx);
      return true;
    });
    return { state: truncated ? 'truncated' : 'busy', carried: moved };
  } catch (err) {
    if (isLockTimeout(err)) return { state: 'blocked', carried: moved };
    throw err;
  }
}

/**
 * A transaction is "open a while" after this long: claims, enqueues and acks hold their locks for
 * milliseconds, a reader of baton.jobs for as long as it stays.
 */
const HELD_OPEN_MS = 1_000;

/**
 * The slots on which another session holds a lock in a transaction open HELD_OPEN_MS or more: their
 * truncation would only wait (and make the hot statements wait behind it) until its lock_timeout.
 */
async function slotsHeldOpen(db: Db): Promise<Set<number>> {
  const { rows } = await sql<{ slot: number }>`
    SELECT DISTINCT substring(c.relname FROM 'jobs_([0-9]+)$')::integer AS slot
    FROM pg_locks l
    JOIN pg_class c ON c.oid = l.relation
    JOIN pg_stat_activity a ON a.pid = l.pid
    WHERE ${heldOpen(HELD_OPEN_MS)}`.execute(db);
  return new Set(rows.map((r) => r.slot));
}

/**
 * Lock `l` (pg_locks) is on a partition of baton.jobs, held by session `a` (pg_stat_activity), not
 * this one, in a transaction open `olderThanMs` or more.
 */
function heldOpen(olderThanMs: number) {
  return sql`l.locktype = 'relation' AND l.granted AND l.pid <> pg_backend_pid()
      AND l.relation IN (SELECT inhrelid FROM pg_inherits WHERE inhparent = 'baton.jobs'::regclass)
      AND a.xact_start < clock_timestamp() - ${olderThanMs}::integer * interval '1 millisecond'`;
}

/** A session holding a lock on the ring while its transaction has been open a while. */
export interface RingLockHolder {
  pid: number;
  application_name: string;
  state: string | null;
  transaction_seconds: number;
}

/**
 * Who keeps the ring from being truncated: sessions other than this one holding a lock on a partition
 * of baton.jobs in a transaction open for `olderThanMs` or more (a report's REPEATABLE READ
 * transaction that counted the jobs, say). Claims and acks hold such locks for milliseconds only.
 */
export async function ringLockHolders(db: Db, olderThanMs: number): Promise<RingLockHolder[]> {
  const { rows } = await sql<RingLockHolder>`
    SELECT a.pid, a.application_name, a.state,
           round(extract(epoch FROM clock_timestamp() - a.xact_start))::integer AS transaction_seconds
    FROM pg_stat_activity a
    WHERE EXISTS (SELECT 1 FROM pg_locks l WHERE l.pid = a.pid AND ${heldOpen(olderThanMs)})
    ORDER BY a.xact_start
    LIMIT 5`.execute(db);
  return rows;
}

/** How long the ring counts as pinned after a blocked truncation (RingDuty.pinned). */
const PINNED_FOR_MS = 5_000;

/** How often a blocked ring is reported in the log (the metric counts every blocked truncation). */
const REPORT_EVERY_MS = 60_000;

/**
 * The ring duty: a pass every `intervalMs`, and again at once while a carry filled its batch. While
 * truncations are blocked it names, at most once a minute, the sessions whose open transactions hold
 * the ring's locks: until they end, every claim and ack leaves dead rows that the claims walk
 * (docs/adr/0013-claims-under-readers.md).
 */
export class RingDuty implements Duty<RingResult> {
  readonly name = 'ring';
  private reportedAt = 0;
  private blockedAt = Number.NEGATIVE_INFINITY;

  constructor(
    private readonly db: Db,
    private readonly metrics: Metrics,
    private readonly log: Log,
    private readonly intervalMs: number,
    private readonly opts: RingOptions & { holdersOlderThanMs?: number },
  ) {}

  async runOnce(): Promise<RingResult> {
    const result = await maintainRing(this.db, this.opts);
    this.metrics.ringTruncations.inc({ outcome: 'truncated' }, result.truncated.length);
    this.metrics.ringTruncations.inc({ outcome: 'blocked' }, result.blocked);
    this.metrics.ringCarried.inc(result.carried);
    this.metrics.ringSlotsInUse.set(result.inUse);
    if (result.blocked > 0) this.blockedAt = Date.now();
    if (result.blocked > 0 && Date.now() - this.reportedAt >= REPORT_EVERY_MS) {
      const holders = await ringLockHolders(this.db, this.opts.holdersOlderThanMs ?? 5_000);
      if (holders.length > 0) {
        this.reportedAt = Date.now();
        this.log.warn(
          { holders, blocked_slots: result.blocked },
          'the ring of live jobs cannot be truncated: these open transactions hold locks on baton.jobs, and claims slow down until they end (docs/operating.md, "Reading Baton\'s tables")',
        );
      }
    }
    return result;
  }

  /**
   * Whether a truncation was blocked in the last PINNED_FOR_MS: a pass whose sealed slots all
   * still held rows tried none, so one such pass does not end it. Claims start from floors meanwhile
   * (claim-floors.ts).
   */
  get pinned(): boolean {
    return Date.now() - this.blockedAt < PINNED_FOR_MS;
  }

  nextRunInMs(last: RingResult | undefined): number {
    return last && last.carried >= this.opts.carryBatch ? 0 : this.intervalMs;
  }
}
