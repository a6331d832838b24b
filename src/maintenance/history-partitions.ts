import { sql } from 'kysely';
import type { Db } from '../db/database.js';
import { isLockTimeout } from '../db/errors.js';
import type { Metrics } from '../metrics/metrics.js';
import type { QueueDefaults } from '../queues/queue-settings.js';
import type { Duty } from './duty.js';
import { retentionMs } from './prune.js';

/**
 * History partitions (migrations/0014_history_partitions.ts, docs/adr/0001-history-partitions.md):
 * baton.job_history is split by state class (`done`: completed and cancelled; `dead`), each by the
 * UTC day jobs finished on, `baton.job_history_<class>_<YYYYMMDD>`, with a default partition under
 * each class. Each pass:
 *
 * 1. Ahead: today's partitions and the next `daysAhead` days' exist, and so does one for every day
 *    the default partition holds rows of (the leader was away for days): created as a plain table,
 *    that day's rows moved into it from the default, attached, in one transaction that holds the
 *    default partition ACCESS EXCLUSIVE under lock_timeout (ATTACH takes that lock anyway, and scans
 *    the default for rows of the new day). ATTACH locks the class table SHARE UPDATE EXCLUSIVE only,
 *    so acks inserting meanwhile do not wait. Inserts never fail for want of a partition: the
 *    default takes whatever no day does.
 * 2. Expired days: a day partition whose every row is past its queue's retention (read now, as the
 *    row prune reads it, defaults for collected queues) and whose jobs hold no live idempotency key
 *    is emptied with TRUNCATE: lock it ACCESS EXCLUSIVE under lock_timeout, check again under the
 *    lock (a row committed before the lock is seen), TRUNCATE. Acks insert into today's partition
 *    only and never wait for it; readers of history (which open every partition) wait at most
 *    lock_timeout. Then, in a second transaction, the empty table is dropped: DROP locks the class
 *    table ACCESS EXCLUSIVE (and the default), so it waits at most lock_timeout and holds the lock
 *    for the drop alone; it is checked empty under that lock first.
 *
 * A lock timeout anywhere rolls that step back and counts as `blocked`; it is tried again next
 * pass. Two leaders at once: every step takes a transaction advisory lock first, and skips if the
 * other holds it.
 */

export const HISTORY_CLASSES = {
  done: ['completed', 'cancelled'],
  dead: ['dead'],
} as const;
export type HistoryClass = keyof typeof HISTORY_CLASSES;

/** Partitions created ahead of today: the leader may be away this long before inserts reach a default. */
export const HISTORY_DAYS_AHEAD = 2;
/** Day partitions emptied per pass at most (each one a TRUNCATE and a DROP). */
const DROPS_PER_PASS = 8;
const DAY_MS = 86_400_000;
const RELOPTIONS = sql`autovacuum_vacuum_scale_factor = 0.05, autovacuum_vacuum_insert_scale_factor = 0.05`;
const LOCK_KEY = sql`hashtext('baton.history_partitions')`;

export interface HistoryPartitionsResult {
  /** Day partitions created (`done_20261202`). */
  created: string[];
  /** Rows moved out of a default partition into a new day partition. */
  moved: number;
  /** Day partitions emptied with TRUNCATE and dropped. */
  dropped: string[];
  /** Day partitions emptied but not dropped (the DROP was blocked, or a row came in since): dropped next pass. */
  truncated: string[];
  /** Past days kept because a row is within retention or holds a live idempotency key. */
  kept: number;
  /** Steps rolled back by a lock timeout (tried again next pass). */
  blocked: number;
}

export interface HistoryPartitionsOptions {
  lockTimeoutMs: number;
  defaults: Pick<QueueDefaults, 'completedRetentionMs' | 'deadRetentionMs'>;
  daysAhead?: number;
}

interface DayPartition {
  cls: HistoryClass;
  day: string;
  from: Date;
  to: Date;
}

const parentOf = (cls: HistoryClass) => sql.table(`baton.job_history_${cls}`);
const defaultOf = (cls: HistoryClass) => sql.table(`baton.job_history_${cls}_default`);
const tableOf = (p: { cls: HistoryClass; day: string }) => sql.table(`baton.job_history_${p.cls}_${p.day}`);

/** YYYYMMDD of a UTC day, and back. */
export function dayName(at: Date): string {
  return at.toISOString().slice(0, 10).replaceAll('-', '');
}
function dayOf(cls: HistoryClass, day: string): DayPartition {
  const from = new Date(`${day.slice(0, 4)}-${day.slice(4, 6)}-${day.slice(6, 8)}T00:00:00Z`);
  return { cls, day, from, to: new Date(from.getTime() + DAY_MS) };
}

/** The day partitions there are now, oldest first. */
export async function listHistoryPartitions(db: Db): Promise<DayPartition[]> {
  const { rows } = await sql<{ name: string }>`
    SELECT c.relname AS name FROM pg_inherits i
    JOIN pg_class c ON c.oid = i.inhrelid
    WHERE i.inhparent IN ('baton.job_history_done'::regclass, 'baton.job_history_dead'::regclass)`.execute(
    db,
  );
  const out: DayPartition[] = [];
  for (const { name } of rows) {
    const m = /^job_history_(done|dead)_(\d{8})$/.exec(name);
    if (m) out.push(dayOf(m[1] as HistoryClass, m[2]!));
  }
  return out.sort((a, b) => a.from.getTime() - b.from.getTime() || a.cls.localeCompare(b.cls));
}

/** One step in its own transaction, under lock_timeout and the duty's advisory lock. */
async function step<T>(db: Db, lockTimeoutMs: number, body: (trx: Db) => Promise<T>): Promise<T | 'blocked'> {
  try {
    return await db.transaction().execute(async (trx) => {
      await sql`SELECT set_config('lock_timeout', ${`${lockTimeoutMs}ms`}, true)`.execute(trx);
      const { rows } = await sql<{
        got: boolean;
      }>`SELECT pg_try_advisory_xact_lock(${LOCK_KEY}) AS got`.execute(trx);
      if (!rows[0]!.got) return 'blocked' as const;
      return body(trx);
    });
  } catch (err) {
    if (isLockTimeout(err)) return 'blocked';
    throw err;
  }
}

/** Create the day partitions due: today and the days ahead, and the days the defaults hold rows of. */
export async function createHistoryPartitions(
  db: Db,
  opts: HistoryPartitionsOptions,
  result: HistoryPartitionsResult = emptyResult(),
): Promise<HistoryPartitionsResult> {
  const existing = new Set((await listHistoryPartitions(db)).map((p) => `${p.cls}_${p.day}`));
  const { rows } = await sql<{ today: Date }>`SELECT date_trunc('day', now(), 'UTC') AS today`.execute(db);
  const today = rows[0]!.today.getTime();
  for (const cls of Object.keys(HISTORY_CLASSES) as HistoryClass[]) {
    const days = new Set<string>();
    for (let n = 0; n <= (opts.daysAhead ?? HISTORY_DAYS_AHEAD); n++)
      days.add(dayName(new Date(today + n * DAY_MS)));
    const stray = await sql<{ day: string }>`
      SELECT DISTINCT to_char(date_trunc('day', finished_at, 'UTC'), 'YYYYMMDD') AS day
      FROM ${defaultOf(cls)} ORDER BY 1 LIMIT ${DROPS_PER_PASS}`.execute(db);
    for (const { day } of stray.rows) days.add(day);
    for (const day of [...days].sort()) {
      if (existing.has(`${cls}_${day}`)) continue;
      const p = dayOf(cls, day);
      const outcome = await step(db, opts.lockTimeoutMs, async (trx) => {
        const there = await sql<{
          t: string | null;
        }>`SELECT to_regclass(${`baton.job_history_${cls}_${day}`})::text AS t`.execute(trx);
        if (there.rows[0]!.t) return 0;
        await sql`LOCK TABLE ${defaultOf(cls)} IN ACCESS EXCLUSIVE MODE`.execute(trx);
        await sql`
          CREATE TABLE ${tableOf(p)} (LIKE ${parentOf(cls)} INCLUDING DEFAULTS INCLUDING CONSTRAINTS)
          WITH (${RELOPTIONS})`.execute(trx);
        const moved = await sql`
          WITH moved AS (
            DELETE FROM ${defaultOf(cls)}
            WHERE finished_at >= ${p.from}::timestamptz AND finished_at < ${p.to}::timestamptz
            RETURNING *
          )
          INSERT INTO ${tableOf(p)} SELECT * FROM moved`.execute(trx);
        await sql`
          ALTER TABLE ${parentOf(cls)} ATTACH PARTITION ${tableOf(p)}
          FOR VALUES FROM (${sql.lit(p.from.toISOString())}) TO (${sql.lit(p.to.toISOString())})`.execute(
          trx,
        );
        result.created.push(`${cls}_${day}`);
        return Number(moved.numAffectedRows ?? 0);
      });
      if (outcome === 'blocked') result.blocked++;
      else result.moved += outcome;
    }
  }
  return result;
}

/**
 * Whether every row of this day partition is past its queue's retention (its state's), and none of
 * its jobs holds a live idempotency key. Queues present are found by a loose scan of the
 * partition's (queue, state, finished_at, id) index, one probe per queue and state after that.
 */
async function expired(db: Db, p: DayPartition, opts: HistoryPartitionsOptions): Promise<boolean> {
  const leaf = tableOf(p);
  const states = sql.join(HISTORY_CLASSES[p.cls].map((s) => sql`(${s})`));
  const { rows } = await sql<{ expired: boolean }>`
    WITH RECURSIVE present AS (
      (SELECT queue FROM ${leaf} ORDER BY queue LIMIT 1)
      UNION ALL
      SELECT (SELECT h.queue FROM ${leaf} h WHERE h.queue > p.queue ORDER BY h.queue LIMIT 1)
      FROM present p WHERE p.queue IS NOT NULL
    )
    SELECT NOT EXISTS (
             SELECT 1 FROM present p
             LEFT JOIN baton.queues q ON q.name = p.queue
             CROSS JOIN (VALUES ${states}) AS s(state)
             WHERE p.queue IS NOT NULL AND EXISTS (
               SELECT 1 FROM ${leaf} h WHERE h.queue = p.queue AND h.state = s.state
                 AND h.finished_at >= now() - ${retentionMs(sql`s.state`, 'q', opts.defaults)} * interval '1 millisecond'))
       AND NOT EXISTS (
             SELECT 1 FROM ${leaf} h
             JOIN baton.idempotency_keys k ON k.queue = h.queue AND k.key = h.idempotency_key AND k.job_id = h.id
             WHERE k.expires_at > now()) AS expired`.execute(db);
  return rows[0]!.expired;
}

/** Empty (TRUNCATE) and drop the past day partitions whose rows are all past retention. */
export async function dropExpiredHistoryPartitions(
  db: Db,
  opts: HistoryPartitionsOptions,
  result: HistoryPartitionsResult = emptyResult(),
): Promise<HistoryPartitionsResult> {
  const { rows } = await sql<{ now: Date }>`SELECT now() AS now`.execute(db);
  const now = rows[0]!.now.getTime();
  let done = 0;
  for (const p of await listHistoryPartitions(db)) {
    if (p.to.getTime() > now || done >= DROPS_PER_PASS) continue;
    if (!(await expired(db, p, opts))) {
      result.kept++;
      continue;
    }
    done++;
    const emptied = await step(db, opts.lockTimeoutMs, async (trx) => {
      await sql`LOCK TABLE ${tableOf(p)} IN ACCESS EXCLUSIVE MODE`.execute(trx);
      if (!(await expired(trx, p, opts))) return false;
      await sql`TRUNCATE ${tableOf(p)}`.execute(trx);
      return true;
    });
    if (emptied === 'blocked') {
      result.blocked++;
      continue;
    }
    if (!emptied) {
      result.kept++;
      continue;
    }
    const dropped = await step(db, opts.lockTimeoutMs, async (trx) => {
      await sql`LOCK TABLE ONLY ${parentOf(p.cls)} IN ACCESS EXCLUSIVE MODE`.execute(trx);
      // A row inserted since the TRUNCATE (a transaction that began before the day ended) keeps it.
      const left = await sql`SELECT 1 FROM ${tableOf(p)} LIMIT 1`.execute(trx);
      if (left.rows.length > 0) return false;
      await sql`DROP TABLE ${tableOf(p)}`.execute(trx);
      return true;
    });
    if (dropped === true) result.dropped.push(`${p.cls}_${p.day}`);
    else {
      result.truncated.push(`${p.cls}_${p.day}`);
      if (dropped === 'blocked') result.blocked++;
    }
  }
  return result;
}

function emptyResult(): HistoryPartitionsResult {
  return { created: [], moved: 0, dropped: [], truncated: [], kept: 0, blocked: 0 };
}

/** The duty: a pass every `intervalMs`; again after a tick while a step was blocked or a cap was hit. */
export class HistoryPartitionsDuty implements Duty<HistoryPartitionsResult> {
  readonly name = 'history_partitions';
  constructor(
    private readonly db: Db,
    private readonly metrics: Metrics,
    private readonly intervalMs: number,
    private readonly tickMs: number,
    private readonly opts: HistoryPartitionsOptions,
  ) {}

  async runOnce(): Promise<HistoryPartitionsResult> {
    const result = await createHistoryPartitions(this.db, this.opts);
    await dropExpiredHistoryPartitions(this.db, this.opts, result);
    this.metrics.historyPartitions.inc({ outcome: 'created' }, result.created.length);
    this.metrics.historyPartitions.inc({ outcome: 'dropped' }, result.dropped.length);
    this.metrics.historyPartitions.inc({ outcome: 'blocked' }, result.blocked);
    return result;
  }

  nextRunInMs(last: HistoryPartitionsResult | undefined): number {
    if (!last || last.blocked > 0 || last.dropped.length >= DROPS_PER_PASS) return this.tickMs;
    return this.intervalMs;
  }
}
