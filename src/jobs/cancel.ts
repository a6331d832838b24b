import { type RawBuilder, sql } from 'kysely';
import type { Db } from '../db/database.js';
import { DomainError, jobNotFound, queueNotFound } from '../errors.js';
import { isLiveState, type LiveState } from '../job-states.js';
import { getQueue } from '../queues/queue-store.js';
import { finishedJobColumns, finishedRow, inScope, type JobRow, liveCommonColumns } from './job-row.js';
import { getJob } from './read.js';
import { retryWhenMoved } from './ring.js';

const cancelled = finishedRow('cancelled');

/**
 * How many times a cancel looks for a job that moved between live tables while it looked. Each move
 * is an event of its own (a release, a promotion, a nack to a backoff), so a second try almost always
 * finds it; the bound only stops a job that keeps moving from holding the request.
 */
const CANCEL_TRIES = 5;

/**
 * Cancel: a waiting, scheduled, ready or claimed job moves to job_history as `cancelled`. A claimed job's
 * worker finds out on its next renew, ack or nack (409 lease_lost), because its row is gone.
 *
 * If an ack holds the row at this moment, the DELETE waits for it and then finds nothing; the job
 * is then read from history: cancelling a cancelled job answers it again (a retry is harmless),
 * a completed or dead one is 409 invalid_state.
 *
 * The three DELETEs share one snapshot, so a job moved from one live table to another by a
 * transaction that commits while the statement runs (waiting → ring by a release, scheduled → ring
 * by the promoter or run now, ring → scheduled by a nack) is missed in both: the old row is gone
 * once its lock is released, and the new one is too young for the snapshot. The re-read then finds
 * the job live, and the DELETEs run again with a fresh snapshot (READ COMMITTED: `db` must not be a
 * REPEATABLE READ transaction), which finds it where it is now.
 */
export async function cancelJob(
  db: Db,
  id: string,
  queue?: string,
): Promise<{ job: JobRow; already: boolean }> {
  for (let attempt = 1; ; attempt++) {
    const job = await deleteLiveJob(db, id, queue);
    if (job) return { job, already: false };
    const row = await getJob(db, id, queue);
    if (!row) throw jobNotFound(id);
    if (row.state === 'cancelled') return { job: row, already: true };
    if (!isLiveState(row.state)) {
      throw new DomainError('invalid_state', `job ${id} is already ${row.state} and cannot be cancelled`);
    }
    if (attempt >= CANCEL_TRIES) {
      throw new DomainError(
        'invalid_state',
        `job ${id} moved ${CANCEL_TRIES} times while being cancelled (it is ${row.state} now); cancel it again`,
      );
    }
  }
}

/** Delete the job from whichever live table holds it, into history as cancelled; undefined if none did. */
async function deleteLiveJob(db: Db, id: string, queue?: string): Promise<JobRow | undefined> {
  // A live job is in the ring (any slot: it may have been carried) or among the scheduled or waiting
  // jobs; with `queue` (a queue-limited key's scope, lease-outcome.ts's ScopedId), only a job of that queue.
  const scope = sql`${queue ?? null}::text`;
  const { rows } = await retryWhenMoved(() =>
    sql<JobRow>`
      WITH ring AS (DELETE FROM baton.jobs j WHERE id = ${id} AND ${inScope('j', scope)} RETURNING ${liveCommonColumns('j')}),
      later AS (DELETE FROM baton.scheduled_jobs s WHERE id = ${id} AND ${inScope('s', scope)}
                RETURNING ${liveCommonColumns('s')}),
      waiting AS (DELETE FROM baton.waiting_jobs w WHERE id = ${id} AND ${inScope('w', scope)}
                  RETURNING ${liveCommonColumns('w')}),
      gone AS (SELECT * FROM ring UNION ALL SELECT * FROM later UNION ALL SELECT * FROM waiting)
      INSERT INTO baton.job_history AS h (${cancelled.columns})
      SELECT ${cancelled.values} FROM gone
      RETURNING ${finishedJobColumns}`.execute(db),
  );
  return rows[0];
}

/** How many live jobs of a queue to cancel per transaction. */
const CANCEL_BATCH = 1000;

/** Told the ids of each batch of jobs cancelled, once its statement has run (committed, unless `db` is a transaction). */
export type OnCancelled = (ids: string[]) => void;

/**
 * Cancel live jobs of a queue in bounded batches (each its own transaction), so cancelling a
 * million jobs never holds one giant transaction. `states` picks which live states.
 */
export async function cancelQueueJobs(
  db: Db,
  queue: string,
  states: readonly LiveState[],
  onCancelled: OnCancelled = () => {},
): Promise<number> {
  const inRing = states.filter((s) => s === 'ready' || s === 'claimed');
  // Jobs off the ring, each state in a table of its own (ring.ts), by id alone.
  const offRing = (table: 'waiting_jobs' | 'scheduled_jobs') =>
    cancelInBatches(
      db,
      sql`SELECT id FROM ${sql.table(`baton.${table}`)} WHERE queue = ${queue}`,
      (picked) => sql`DELETE FROM ${sql.table(`baton.${table}`)} o USING ${picked} p WHERE o.id = p.id
                      RETURNING ${liveCommonColumns('o')}`,
      onCancelled,
    );
  const ring = () =>
    cancelInBatches(
      db,
      sql`SELECT id, slot FROM baton.jobs WHERE queue = ${queue} AND state = ANY(${inRing}::text[])`,
      (picked) => sql`DELETE FROM baton.jobs j USING ${picked} p WHERE j.id = p.id AND j.slot = p.slot
                      RETURNING ${liveCommonColumns('j')}`,
      onCancelled,
    );
  let total = 0;
  // Waiting jobs first: a parent cancelled after them finds no waiting child to cancel again, and a
  // child released meanwhile is in the ring or among the scheduled jobs before their passes.
  if (states.includes('waiting')) total += await offRing('waiting_jobs');
  if (inRing.length > 0) total += await ring();
  if (states.includes('scheduled')) {
    total += await offRing('scheduled_jobs');
    // A scheduled job the promoter (or a run now) moved into the ring after the ring's pass, or while
    // this pass skipped it locked, was missed by both: the ring once more. Its pass ends only once no
    // scheduled job is left, so every such move has committed by now. (A claimed job nacked to a
    // backoff goes the other way: caught by the scheduled pass, unless nacked during this last one.)
    if (inRing.length > 0) total += await ring();
  }
  return total;
}

/** Cancel the rows `select` finds, CANCEL_BATCH at a time, until none is left. */
async function cancelInBatches(
  db: Db,
  select: RawBuilder<unknown>,
  remove: (picked: RawBuilder<unknown>) => RawBuilder<unknown>,
  onCancelled: OnCancelled,
): Promise<number> {
  let total = 0;
  while (true) {
    const { rows } = await retryWhenMoved(() =>
      sql<Pick<JobRow, 'id'>>`
        WITH picked AS (${select} LIMIT ${CANCEL_BATCH} FOR UPDATE SKIP LOCKED),
        gone AS (${remove(sql`picked`)})
        INSERT INTO baton.job_history AS h (${cancelled.columns})
        SELECT ${cancelled.values} FROM gone
        RETURNING h.id`.execute(db),
    );
    total += rows.length;
    if (rows.length > 0) onCancelled(rows.map((row) => row.id));
    if (rows.length < CANCEL_BATCH) {
      // A short batch may mean rows locked by someone else (an ack in flight): check before stopping.
      const left = await sql`${select} LIMIT 1`.execute(db);
      if (left.rows.length === 0) return total;
      if (rows.length === 0) await new Promise((r) => setTimeout(r, 10));
    }
  }
}

/**
 * Purge: cancel every waiting, ready and scheduled job of a queue (claimed ones are left to their
 * workers). Waiting jobs go first, so a purged parent's cancellation finds no waiting child of this
 * queue to cancel again.
 */
export async function purgeQueue(db: Db, queue: string, onCancelled?: OnCancelled): Promise<number> {
  if (!(await getQueue(db, queue))) throw queueNotFound(queue);
  return cancelQueueJobs(db, queue, ['waiting', 'ready', 'scheduled'], onCancelled);
}
