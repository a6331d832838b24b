import { sql } from 'kysely';
import type { Db } from '../db/database.js';

/**
 * Renew: push a lease's expiry forward. It succeeds only while the job is still `claimed` under the
 * presented token, so a worker whose lease was re-armed and handed to someone else cannot extend it.
 *
 * The UPDATE changes only lease_expires_at and lease_ms. Neither is in any index and the table has
 * free space on each page (fillfactor 70), so PostgreSQL can do it as a HOT update: no index entry
 * is written, however often workers renew.
 */
export async function renewLease(
  db: Db,
  id: string,
  leaseToken: string,
  leaseMs?: number,
): Promise<{ queue: string; lease_expires_at: Date; lease_ms: number } | undefined> {
  const { rows } = await sql<{ queue: string; lease_expires_at: Date; lease_ms: number }>`
    UPDATE baton.jobs SET
      lease_ms = coalesce(${leaseMs ?? null}::integer, lease_ms),
      lease_expires_at = clock_timestamp() + coalesce(${leaseMs ?? null}::integer, lease_ms) * interval '1 millisecond'
    WHERE id = ${id} AND state = 'claimed' AND lease_token = ${leaseToken}::uuid
    RETURNING queue, lease_expires_at, lease_ms`.execute(db);
  return rows[0];
}
