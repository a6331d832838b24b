import type { Selectable } from 'kysely';
import { sql } from 'kysely';
import type { Db } from '../db/database.js';
import type { QueueHistoryTable } from '../db/schema.js';

/**
 * Reads of baton.queue_history, the per-minute samples the leader writes
 * (src/maintenance/queue-history.ts). One index range read per call, on the table's primary key.
 */

export type QueueSampleRow = Selectable<QueueHistoryTable>;

/**
 * The samples of a queue's last `minutes` minutes (the current one included), oldest first, with
 * the database's clock; undefined when there is no such queue.
 */
export async function readQueueHistory(
  db: Db,
  queue: string,
  minutes: number,
): Promise<{ now: Date; samples: QueueSampleRow[] } | undefined> {
  const { rows } = await sql<{ now: Date; exists: boolean }>`
    SELECT now() AS now, EXISTS (SELECT 1 FROM baton.queues WHERE name = ${queue}) AS exists`.execute(db);
  const { now, exists } = rows[0]!;
  if (!exists) return undefined;
  const samples = await sql<QueueSampleRow>`
    SELECT * FROM baton.queue_history
    WHERE queue = ${queue}
      AND minute >= date_trunc('minute', ${now}::timestamptz) - (${minutes}::int - 1) * interval '1 minute'
    ORDER BY minute`.execute(db);
  return { now, samples: samples.rows };
}
