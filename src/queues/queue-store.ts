import { sql } from 'kysely';
import type { Db } from '../db/database.js';

/**
 * SQL for baton.queues used by the job lifecycle. (Queue administration lives with the queue
 * routes; the leader's garbage collection lives in src/maintenance/queue-gc.ts.)
 */

/**
 * Create an auto-created queue with every setting at its server default. Runs only when an
 * enqueue found no queue row (first use, or the leader collected an idle queue a moment ago),
 * never on the ordinary enqueue path. ON CONFLICT DO NOTHING: a concurrent creator wins harmlessly.
 */
export async function createAutoQueue(db: Db, name: string): Promise<void> {
  await sql`
    INSERT INTO baton.queues (name, auto_created) VALUES (${name}, true)
    ON CONFLICT (name) DO NOTHING`.execute(db);
}
