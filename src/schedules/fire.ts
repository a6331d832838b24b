import type { Transaction } from 'kysely';
import type { Db } from '../db/database.js';
import { isUnavailableError } from '../db/errors.js';
import type { Database } from '../db/schema.js';
import { DomainError } from '../errors.js';
import { type EnqueueItem, type EnqueueOptions, enqueueInTransaction } from '../jobs/enqueue/enqueue.js';
import { liveJobIds } from '../jobs/read.js';
import { cronPlan } from './cron.js';
import { type Decision, decide } from './occurrences.js';
import { type Advance, advanceSchedules, databaseNow, lockDueSchedules, type ScheduleRow } from './store.js';

/**
 * The leader's work on due schedules: enqueue each due occurrence exactly once.
 *
 * One transaction per batch of due schedules: their rows are locked FOR UPDATE SKIP LOCKED, every
 * occurrence's job is inserted (jobs/enqueue.ts, enqueueInTransaction), and each row's next_run_at,
 * last_run_at and last_job_id move on, all committing together or not at all. So:
 * - a leader that dies anywhere in the middle (between the read and the enqueue, between the enqueue
 *   and the advance) commits nothing; its row locks go with its session, and the next leader finds
 *   the same occurrences still due and enqueues them;
 * - a second leader skips rows the first holds, and does not see rows the first has advanced
 *   (PostgreSQL re-checks `next_run_at <= now` on the newest row version it locks); the advance also
 *   matches only the next_run_at read under the lock, else the whole batch rolls back;
 * - each job carries the idempotency key `schedule:<name>:<occurrence>`: were the same occurrence
 *   ever enqueued twice, the second enqueue would find the first job instead of making another;
 * - "now" is the database's now(), and occurrences are computed from it, so replicas whose clocks
 *   differ agree on what is due.
 */

export interface FireOptions {
  enqueue: Omit<EnqueueOptions, 'idempotencyRetentionMs'>;
  /** Occurrences older than this when reached count as missed under catch_up none. */
  graceMs: number;
  /** Schedules per transaction. */
  batch: number;
  /** The database time to act at, for tests of a given day; production leaves it to now(). */
  now?: Date;
}

/**
 * How long an occurrence's idempotency key is kept. It only has to outlive a transaction that could
 * still be racing for the same occurrence (seconds); an hour keeps the keys table small with many
 * schedules (10,000 schedules a minute keep 600,000 keys, not the 14 million a day would).
 */
export const OCCURRENCE_KEY_RETENTION_MS = 3_600_000;

export type Outcome = 'enqueued' | 'skipped' | 'missed' | 'coalesced' | 'folded' | 'failed' | 'duplicate';

export interface FireResult {
  /** Due schedules handled (advanced). */
  schedules: number;
  /** Occurrences per queue and outcome. */
  outcomes: { queue: string; outcome: Outcome; n: number }[];
  /** Each enqueued job: from its occurrence to its enqueue (database clock), and whether it is ready. */
  jobs: { queue: string; latenessMs: number; ready: boolean }[];
  /** Schedules that failed (their occurrences are lost; the error is on the schedule). */
  failures: { name: string; error: string }[];
  /** The batch was full: more may be due. */
  more: boolean;
}

/**
 * The job a schedule enqueues, at an occurrence or a trigger: its definition's job fields. A group
 * marks the queue grouped on the first such job (the enqueue's insert does it, as for any enqueue).
 * expires_in_ms counts from the enqueue, not the occurrence, so a late occurrence gets its full time.
 */
export function jobOfSchedule(row: ScheduleRow): EnqueueItem {
  return {
    payloadJson: row.payload_json,
    priority: row.priority,
    maxAttempts: row.max_attempts ?? undefined,
    group: row.group_key ?? undefined,
    timeoutMs: row.timeout_ms ?? undefined,
    expiresInMs: row.expires_in_ms ?? undefined,
    uniqueKey: row.unique_key ?? undefined,
    onConflict: row.on_conflict ?? undefined,
  };
}

export const occurrenceKey = (name: string, occurrence: Date) =>
  `schedule:${name}:${occurrence.toISOString()}`;

export async function fireDueSchedules(db: Db, opts: FireOptions): Promise<FireResult> {
  try {
    return await db.transaction().execute((trx) => fireBatch(trx, opts, opts.batch));
  } catch (err) {
    if (isUnavailableError(err)) throw err;
    // Something in one schedule broke the shared transaction (a value PostgreSQL refused, a stored
    // cron this croner no longer reads). Go one schedule per transaction, so only that one fails.
    return fireOneByOne(db, opts);
  }
}

async function fireOneByOne(db: Db, opts: FireOptions): Promise<FireResult> {
  const total = emptyResult();
  for (let i = 0; i < opts.batch; i++) {
    let row: ScheduleRow | undefined;
    let now: Date | undefined;
    try {
      const one = await db.transaction().execute(async (trx) => {
        now = await databaseNow(trx, opts.now);
        [row] = await lockDueSchedules(trx, now, 1);
        return row ? fireRows(trx, opts, now, [row]) : undefined;
      });
      if (!one) break;
      merge(total, one);
    } catch (err) {
      if (isUnavailableError(err) || !row || !now) throw err;
      merge(total, await recordFailure(db, opts, now, row, err));
    }
  }
  total.more = total.schedules >= opts.batch;
  return total;
}

/** A schedule that failed on its own: move it past its due occurrences, with the error recorded. */
async function recordFailure(db: Db, opts: FireOptions, now: Date, row: ScheduleRow, err: unknown) {
  const message = (err as Error).message ?? String(err);
  let next: Date | null = null;
  let due = 1;
  try {
    const decision = decideFor(row, now, opts.graceMs, false);
    next = decision.next ?? null;
    due = decision.enqueue.length + decision.missed + decision.coalesced + decision.skipped;
  } catch {
    // The cron itself cannot be read: leave the schedule without a next run (GET shows the error).
  }
  const advanced = await advanceSchedules(db, now, [
    { name: row.name, expected: row.next_run_key!, next, error: message },
  ]);
  const result = emptyResult();
  if (advanced === 1) {
    result.schedules = 1;
    result.outcomes.push({ queue: row.queue, outcome: 'failed', n: due });
    result.failures.push({ name: row.name, error: message });
  }
  return result;
}

async function fireBatch(trx: Transaction<Database>, opts: FireOptions, limit: number): Promise<FireResult> {
  const now = await databaseNow(trx, opts.now);
  const rows = await lockDueSchedules(trx, now, limit);
  const result = await fireRows(trx, opts, now, rows);
  result.more = rows.length >= limit;
  return result;
}

function decideFor(row: ScheduleRow, now: Date, graceMs: number, previousJobLive: boolean): Decision {
  const plan = cronPlan(row.cron, row.timezone);
  return decide(
    plan,
    { nextRunAt: row.next_run_at!, catchUp: row.catch_up, overlap: row.overlap, previousJobLive },
    now,
    graceMs,
  );
}

async function fireRows(
  trx: Transaction<Database>,
  opts: FireOptions,
  now: Date,
  rows: ScheduleRow[],
): Promise<FireResult> {
  const result = emptyResult();
  if (rows.length === 0) return result;
  const previous = rows.flatMap((r) => (r.overlap === 'skip' && r.last_job_id ? [r.last_job_id] : []));
  const live = await liveJobIds(trx, previous);

  const decisions = new Map<string, Decision>();
  const byQueue = new Map<string, { row: ScheduleRow; occurrence: Date }[]>();
  for (const row of rows) {
    const d = decideFor(row, now, opts.graceMs, row.last_job_id !== null && live.has(row.last_job_id));
    decisions.set(row.name, d);
    for (const [outcome, n] of [
      ['skipped', d.skipped],
      ['missed', d.missed],
      ['coalesced', d.coalesced],
    ] as const) {
      if (n > 0) result.outcomes.push({ queue: row.queue, outcome, n });
    }
    for (const occurrence of d.enqueue) {
      const list = byQueue.get(row.queue) ?? [];
      list.push({ row, occurrence });
      byQueue.set(row.queue, list);
    }
  }

  const lastJob = new Map<string, { id: string; occurrence: Date }>();
  const errors = new Map<string, string>();
  const enqueueOpts = { ...opts.enqueue, idempotencyRetentionMs: OCCURRENCE_KEY_RETENTION_MS };
  for (const [queue, list] of byQueue) {
    const items: EnqueueItem[] = list.map(({ row, occurrence }) => ({
      ...jobOfSchedule(row),
      runAt: occurrence.toISOString(),
      idempotencyKey: occurrenceKey(row.name, occurrence),
    }));
    try {
      const enqueued = await enqueueInTransaction(trx, queue, items, enqueueOpts);
      enqueued.forEach(({ job, created }, i) => {
        const { row, occurrence } = list[i]!;
        lastJob.set(row.name, { id: job.id, occurrence });
        if (!created) {
          // The job of this very occurrence (its idempotency key): a duplicate. Any other job is the
          // waiting holder of the schedule's unique_key, which this occurrence was folded into. (An
          // occurrence folded once and then handed out again finds the holder by its idempotency key,
          // and counts as folded again: its job is still not enqueued twice.)
          const own = job.idempotency_key === occurrenceKey(row.name, occurrence);
          result.outcomes.push({ queue, outcome: own ? 'duplicate' : 'folded', n: 1 });
          return;
        }
        result.outcomes.push({ queue, outcome: 'enqueued', n: 1 });
        result.jobs.push({
          queue,
          latenessMs: Math.max(0, job.created_at.getTime() - occurrence.getTime()),
          ready: job.state === 'ready',
        });
      });
    } catch (err) {
      // The queue is missing and may not be created (auto-create off, or the cap reached). Nothing
      // was written for it, so the rest of the batch goes on; these occurrences are lost, and say so.
      if (!(err instanceof DomainError)) throw err;
      for (const { row } of list) {
        errors.set(row.name, err.message);
        result.failures.push({ name: row.name, error: err.message });
      }
      result.outcomes.push({ queue, outcome: 'failed', n: list.length });
    }
  }

  const advances: Advance[] = rows.map((row) => {
    const job = lastJob.get(row.name);
    return {
      name: row.name,
      expected: row.next_run_key!,
      next: decisions.get(row.name)!.next ?? null,
      ...(job ? { lastRunAt: job.occurrence, lastJobId: job.id } : {}),
      error: errors.get(row.name) ?? null,
    };
  });
  const advanced = await advanceSchedules(trx, now, advances);
  // Cannot happen while we hold the rows; if it ever did, enqueue nothing rather than twice.
  if (advanced !== rows.length) throw new Error(`${rows.length - advanced} locked schedules moved under us`);
  result.schedules = rows.length;
  return result;
}

function emptyResult(): FireResult {
  return { schedules: 0, outcomes: [], jobs: [], failures: [], more: false };
}

function merge(into: FireResult, from: FireResult): void {
  into.schedules += from.schedules;
  into.outcomes.push(...from.outcomes);
  into.jobs.push(...from.jobs);
  into.failures.push(...from.failures);
}
