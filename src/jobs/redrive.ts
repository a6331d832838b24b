import { sql } from 'kysely';
import type { Db } from '../db/database.js';
import { invalidField, queueNotFound } from '../errors.js';
import { type AutoCreatePolicy, createAutoQueue } from '../queues/queue-store.js';
import { carriedColumns, carriedValues } from './job-row.js';
import { type ReturnedJob, settleReturnedKeys } from './unique-return.js';

/**
 * Redrive: dead jobs go back to `ready` with their attempts reset (their error history is kept),
 * once the bug that killed them is fixed. All of a queue's dead jobs, a list of ids, or those dead
 * since a time.
 *
 * In bounded batches, each its own transaction, so redriving a million jobs never holds one giant
 * transaction. Each batch first takes FOR KEY SHARE on the queue row (exactly like enqueue, and for
 * the same reason: the leader's queue GC must not delete the queue under jobs we are making live),
 * re-creating the queue if it was collected. The dead rows are taken FOR UPDATE SKIP LOCKED and moved
 * in one statement, which marks the target grouped when it moves jobs with a group into it (as an
 * enqueue of such jobs does), and only then.
 */

/** Which dead jobs: exactly one of a list of ids, those dead since a time (UTC), or all. */
export interface RedriveFilter {
  ids?: string[];
  deadSince?: string;
  all?: boolean;
}

const BATCH = 1000;

/**
 * A job forwarded to a dead-letter queue remembers the queue it died in (`meta.sqs.dead_letter_source`,
 * SQS's DeadLetterQueueSourceArn), so a message move can send it back there
 * (jobs/move-ready.ts). Metadata that is not an object, or whose `sqs` is not one, is left as it is.
 */
const withDeadLetterSource = sql`CASE
  WHEN jsonb_typeof(meta->'sqs') = 'object' THEN jsonb_set(meta, '{sqs,dead_letter_source}', to_jsonb(queue))
  WHEN meta IS NULL THEN jsonb_build_object('sqs', jsonb_build_object('dead_letter_source', queue))
  WHEN jsonb_typeof(meta) = 'object' AND NOT meta ? 'sqs'
    THEN meta || jsonb_build_object('sqs', jsonb_build_object('dead_letter_source', queue))
  ELSE meta END`;

export async function redriveDeadJobs(
  db: Db,
  queue: string,
  filter: RedriveFilter,
  opts: {
    autoCreate: AutoCreatePolicy;
    batchSize?: number;
    /**
     * Send the jobs to this queue instead of back to their own (a dead-letter queue, as the SQS
     * endpoint's RedrivePolicy asks). They keep their id; they take the target queue's max_attempts.
     */
    toQueue?: string;
    /** Told the ids of each batch moved, once its transaction has committed. */
    onMoved?: (ids: string[]) => void;
  },
): Promise<number> {
  const given = [filter.ids !== undefined, filter.deadSince !== undefined, filter.all === true];
  if (given.filter(Boolean).length !== 1) {
    throw invalidField('body', 'must give exactly one of ids, dead_since or all: true');
  }
  const batchSize = opts.batchSize ?? BATCH;
  const target = opts.toQueue ?? queue;
  let total = 0;
  while (true) {
    const moved = await db.transaction().execute(async (trx) => {
      const q = await sql<{ max_attempts: number | null }>`
        SELECT max_attempts FROM baton.queues WHERE name = ${target} FOR KEY SHARE`.execute(trx);
      if (q.rows.length === 0) return undefined;
      // An expires_at already past would only expire the job again: a redrive drops it. The job starts
      // over (attempts 0), so the last attempt's progress report goes too.
      const expiry = {
        expires_at: sql`CASE WHEN expires_at > now() THEN expires_at END`,
        progress: sql`NULL::jsonb`,
      };
      const moved =
        target === queue
          ? expiry
          : {
              ...expiry,
              queue: sql`${target}::text`,
              max_attempts: sql`coalesce(${q.rows[0]!.max_attempts}::integer, max_attempts)`,
              meta: withDeadLetterSource,
            };
      const { rows } = await sql<ReturnedJob & { dependents: boolean }>`
        WITH picked AS (
          -- One text per filter (not "$x IS NULL OR ..."): the request pool always runs the generic
          -- plan (db/database.ts), which could use the primary key for the ids only this way.
          SELECT id FROM baton.job_history
          WHERE queue = ${queue} AND state = 'dead'
            ${filter.ids === undefined ? sql`` : sql`AND id = ANY(${filter.ids}::bigint[])`}
            ${filter.deadSince === undefined ? sql`` : sql`AND finished_at >= ${filter.deadSince}::timestamptz`}
          ORDER BY finished_at, id
          LIMIT ${batchSize}
          FOR UPDATE SKIP LOCKED
        ), moved AS (
          DELETE FROM baton.job_history h USING picked WHERE h.id = picked.id RETURNING h.*
        ), mark_grouped AS (
          -- Jobs with a group make the target grouped, as an enqueue of them does (jobs/enqueue.ts,
          -- mark_grouped), so its next claim serves their groups; jobs without one leave it as it is.
          UPDATE baton.queues SET grouped = true
          WHERE name = (SELECT name FROM baton.queues
                        WHERE name = ${target} AND NOT grouped AND EXISTS (SELECT 1 FROM moved WHERE group_key > '')
                        FOR NO KEY UPDATE SKIP LOCKED)
        )
        INSERT INTO baton.jobs (slot, ${carriedColumns}, state, run_at, attempts, last_error, errors)
        SELECT baton.job_slot(id), ${carriedValues(moved)}, 'ready', now(), 0, last_error, errors
        FROM moved
        RETURNING id, queue, unique_key, dependents`.execute(trx);
      // A redriven job takes its unique key back, or gives way to a job holding it now.
      await settleReturnedKeys(trx, rows);
      // A redriven parent brings back the children its death held or cancelled (migration 0016). Not a
      // job forwarded to a dead-letter queue: that one is a message to look at, not the parent run again.
      const parents = opts.toQueue === undefined ? rows.filter((r) => r.dependents).map((r) => r.id) : [];
      if (parents.length > 0) await sql`SELECT baton.parents_redriven(${parents}::bigint[])`.execute(trx);
      return rows.map((r) => r.id);
    });
    if (moved === undefined) {
      // The queue was collected (or never existed). Bring it back only if it has dead jobs to redrive.
      const dead =
        await sql`SELECT 1 FROM baton.job_history WHERE queue = ${queue} AND state = 'dead' LIMIT 1`.execute(
          db,
        );
      if (!opts.autoCreate.enabled || dead.rows.length === 0) throw queueNotFound(target);
      await createAutoQueue(db, target, opts.autoCreate.maxQueues);
      continue;
    }
    opts.onMoved?.(moved);
    total += moved.length;
    if (moved.length < batchSize) return total;
  }
}
