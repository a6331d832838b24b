import { sql } from 'kysely';
import type { Db } from '../db/database.js';
import { DomainError, queueNotFound } from '../errors.js';
import { LIVE_STATES } from '../job-states.js';
import { lockQueueForDelete, removeQueue } from '../queues/queue-store.js';
import { cancelQueueJobs, type OnCancelled } from './cancel.js';

/**
 * Delete a queue. Without force it refuses (409 queue_not_empty) while the queue has live jobs.
 * With force it cancels them first (in batches), then deletes under the queue row's lock,
 * cancelling any job that arrived in between, so no job is ever left without its queue. Lives in
 * jobs/ because it moves jobs; the queue row itself is queue-store's (queues/ never touches jobs).
 * Answers how many jobs it cancelled; `onCancelled` is told their ids once they are (committed).
 */
export async function deleteQueue(
  db: Db,
  name: string,
  force: boolean,
  onCancelled: OnCancelled = () => {},
): Promise<number> {
  let cancelled = force ? await cancelQueueJobs(db, name, LIVE_STATES, onCancelled) : 0;
  // Jobs cancelled under the queue row's lock are told of after that transaction commits.
  const late: string[] = [];
  const total = await db.transaction().execute(async (trx) => {
    // Waiting for this lock lets in-flight enqueues (FOR KEY SHARE) finish first; new ones wait for us.
    if (!(await lockQueueForDelete(trx, name))) throw queueNotFound(name);
    if (force) cancelled += await cancelQueueJobs(trx, name, LIVE_STATES, (ids) => late.push(...ids));
    const live = await sql<{ n: number }>`
      SELECT ((SELECT count(*) FROM baton.jobs WHERE queue = ${name})
            + (SELECT count(*) FROM baton.scheduled_jobs WHERE queue = ${name})
            + (SELECT count(*) FROM baton.waiting_jobs WHERE queue = ${name}))::int AS n`.execute(trx);
    const n = live.rows[0]!.n;
    if (n > 0) {
      throw new DomainError(
        'queue_not_empty',
        `queue "${name}" has ${n} live jobs; cancel them first or delete with ?force=true`,
      );
    }
    await removeQueue(trx, name);
    return cancelled;
  });
  if (late.length > 0) onCancelled(late);
  return total;
}
