import { sql } from 'kysely';
import type { Db } from '../../db/database.js';
import { invalidField } from '../../errors.js';
import type { EnqueueItem } from './enqueue.js';

/**
 * A job whose expiry comes at or before the moment it could first be claimed can never run: it is
 * born dead. Such an enqueue is refused (400 naming the field) rather than stored and later filed as
 * `expired`, which would hide a producer's mistake (a wrong time zone, seconds for milliseconds).
 *
 * A job could first be claimed at the later of its run_at and the enqueue's now (a run_at in the
 * past is due at once). What can be decided from the values given alone is decided here, without a
 * round trip: expires_at at or before run_at, and expires_in_ms at or below delay_ms (both count from
 * the same now). Everything else depends on now, and the database's clock is the reference for now
 * (a replica's clock may be off): an absolute expires_at without run_at (alone, or with delay_ms), an
 * expires_at after a past run_at, and expires_in_ms with run_at. For those, one statement computes
 * both times exactly as the insert does and answers the first item that could never run. It runs a
 * moment before the insert, so an expiry that falls within those milliseconds is accepted, and the
 * job expires unclaimed like any other whose time passed.
 */

/** Items already converted by the route (times in UTC as `YYYY-MM-DDTHH:MM:SS.ffffffZ`). */
type TimedItem = Pick<EnqueueItem, 'runAt' | 'delayMs' | 'expiresAt' | 'expiresInMs'>;

/**
 * Refuse the first item that could never run, naming its field under `prefix(i)` (`''` for a single
 * enqueue, `jobs[3].` for a batch item).
 */
export async function refuseBornExpired(
  db: Db,
  items: TimedItem[],
  prefix: (index: number) => string,
): Promise<void> {
  const needClock: number[] = [];
  items.forEach((item, i) => {
    const problem = withoutClock(item);
    if (problem) throw invalidField(`${prefix(i)}${problem.field}`, problem.message);
    if (needsClock(item)) needClock.push(i);
  });
  if (needClock.length === 0) return;
  const input = JSON.stringify(
    needClock.map((i) => {
      const item = items[i]!;
      return {
        i,
        run_at: item.runAt ?? null,
        delay_ms: item.delayMs ?? null,
        expires_at: item.expiresAt ?? null,
        expires_in_ms: item.expiresInMs ?? null,
      };
    }),
  );
  // The same expressions as the insert's (enqueue.ts), so the verdict is the insert's.
  const { rows } = await sql<{ i: number }>`
    SELECT v.i FROM json_to_recordset(${input}::json)
      AS v(i integer, run_at timestamptz, delay_ms bigint, expires_at timestamptz, expires_in_ms bigint)
    WHERE coalesce(v.expires_at, now() + v.expires_in_ms * interval '1 millisecond')
          <= greatest(now(), coalesce(v.run_at, now() + coalesce(v.delay_ms, 0) * interval '1 millisecond'))
    ORDER BY v.i LIMIT 1`.execute(db);
  const bad = rows[0]?.i;
  if (bad === undefined) return;
  const item = items[bad]!;
  if (item.expiresInMs !== undefined) {
    throw invalidField(`${prefix(bad)}expires_in_ms`, 'ends at or before run_at: the job could never run');
  }
  throw invalidField(
    `${prefix(bad)}expires_at`,
    item.runAt !== undefined
      ? 'has passed (by the database clock): the job could never run'
      : `is not after ${item.delayMs ? 'now + delay_ms' : 'now'} (by the database clock): the job could never run`,
  );
}

/** A verdict from the values alone, or undefined when they do not settle it. */
function withoutClock(item: TimedItem): { field: string; message: string } | undefined {
  // Both times are UTC text of one fixed width, so text order is time order, to the microsecond.
  if (item.expiresAt !== undefined && item.runAt !== undefined && item.expiresAt <= item.runAt) {
    return { field: 'expires_at', message: 'is at or before run_at: the job could never run' };
  }
  if (item.expiresInMs !== undefined && item.expiresInMs <= (item.delayMs ?? 0)) {
    return {
      field: 'expires_in_ms',
      message:
        item.delayMs === undefined
          ? 'must be at least 1: the job would expire as it is enqueued'
          : 'is not more than delay_ms: the job could never run',
    };
  }
  return undefined;
}

/** Only an absolute time against a relative one (or against now) needs the database's clock. */
const needsClock = (item: TimedItem) =>
  item.expiresAt !== undefined || (item.expiresInMs !== undefined && item.runAt !== undefined);
