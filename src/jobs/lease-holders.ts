import { sql } from 'kysely';
import type { Db } from '../db/database.js';
import { queueVisible } from '../db/queue-patterns.js';

/** Who holds leases now: the claimed jobs of one worker in one queue, summed up. */
export interface LeaseHolderRow {
  /** As the worker named itself on its claims (`worker_id`); null for claims that gave none. */
  worker_id: string | null;
  queue: string;
  jobs: number;
  /** When the oldest of these jobs was claimed: a worker stuck on one job shows here. */
  oldest_claimed_at: Date;
  /** When one of its leases was last granted or renewed (lease_expires_at − lease_ms). */
  last_renewed_at: Date;
  /** The first of its leases to run out, unless renewed. */
  next_expiry_at: Date;
}

/**
 * The workers holding leases now, from the claimed rows alone (nothing is recorded per worker): one
 * row per worker and queue, most jobs first. The claimed rows are the jobs in flight, so this reads
 * as many rows as there are jobs being worked, through the partial index of claimed jobs; with
 * `patterns` (a queue-limited key) only queues they match, in the query itself.
 */
export async function listLeaseHolders(
  db: Db,
  opts: { queue?: string; patterns?: string[]; limit: number },
): Promise<{ holders: LeaseHolderRow[]; asOf: Date }> {
  const { rows } = await sql<LeaseHolderRow & { as_of: Date }>`
    SELECT j.worker_id, j.queue, count(*)::int AS jobs, min(j.claimed_at) AS oldest_claimed_at,
           max(j.lease_expires_at - j.lease_ms * interval '1 millisecond') AS last_renewed_at,
           min(j.lease_expires_at) AS next_expiry_at, statement_timestamp() AS as_of
    FROM baton.jobs j
    WHERE j.state = 'claimed'
      ${opts.queue === undefined ? sql`` : sql`AND j.queue = ${opts.queue}`}
      AND ${queueVisible('j.queue', opts.patterns)}
    GROUP BY j.worker_id, j.queue
    ORDER BY jobs DESC, j.worker_id NULLS LAST, j.queue
    LIMIT ${opts.limit}`.execute(db);
  const asOf =
    rows[0]?.as_of ??
    (await sql<{ now: Date }>`SELECT statement_timestamp() AS now`.execute(db)).rows[0]!.now;
  return { holders: rows.map(({ as_of: _, ...holder }) => holder), asOf };
}
