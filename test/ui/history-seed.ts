import { type Kysely, sql } from 'kysely';
import type { Database } from '../../src/db/schema.js';

/**
 * An hour of made-up history for a queue, so that the screenshots' charts have a shape to show (a
 * test server has lived a minute or two). Only the screenshots use it: the walk's checks do not.
 * The current minute is left to the real leader.
 */
export async function seedHourOfHistory(db: Kysely<Database>, queue: string): Promise<void> {
  const phase = queue.length;
  await sql`
    INSERT INTO baton.queue_history AS h (queue, minute, at, since, scheduled, ready, claimed,
                                         oldest_ready_age_ms, enqueued, completed, dead, cancelled, attempts_failed)
    SELECT ${queue}, m, m + interval '1 second', m - interval '59 seconds', 0, ready, 3,
           ready * 900, enqueued, completed, dead, 0, dead * 3 + retried
    FROM (
      SELECT date_trunc('minute', now()) - g * interval '1 minute' AS m,
             round(30 + 20 * sin((g + ${phase}) / 7.0))::bigint AS enqueued,
             round(28 + 18 * sin((g + ${phase} + 2) / 7.0))::bigint AS completed,
             (g % 9 = ${phase % 9})::int + (g % 23 = 0)::int * 3 AS dead,
             -- Attempts that failed and were retried: a few most minutes, a storm now and then.
             round(2 + 2 * sin((g + ${phase}) / 3.0))::bigint + (g % 17 = ${phase % 17})::int * 12 AS retried,
             round(8 + 7 * sin((g + ${phase}) / 5.0))::bigint AS ready
      FROM generate_series(1, 59) g
    ) s
    ON CONFLICT (queue, minute) DO NOTHING`.execute(db);
}
