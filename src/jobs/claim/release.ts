import { sql } from 'kysely';
import type { Db } from '../../db/database.js';
import { clearedLease } from '../job-row.js';
import { retryWhenMoved } from '../ring.js';
import { type ReturnedJob, settleReturnedKeys } from '../unique-return.js';

/**
 * Give claimed jobs back as if never claimed: used when the client of a long-poll went away
 * before it could receive them. The attempt is not counted. Guarded by the lease token, so a job
 * already acked, re-armed or re-claimed is left alone.
 */
export async function releaseClaims(db: Db, claims: { id: string; lease_token: string }[]): Promise<number> {
  if (claims.length === 0) return 0;
  // A job given back takes its unique key back (or gives way to a newer job holding it), in the
  // same transaction (unique-return.ts).
  const released = await retryWhenMoved(() =>
    db.transaction().execute(async (trx) => {
      const { rows } = await sql<ReturnedJob>`
        UPDATE baton.jobs j SET state = 'ready', attempts = j.attempts - 1, ${clearedLease},
               claimed_at = NULL, worker_id = NULL
        FROM unnest(${claims.map((c) => c.id)}::bigint[], ${claims.map((c) => c.lease_token)}::uuid[]) AS r(id, token)
        WHERE j.id = r.id AND j.state = 'claimed' AND j.lease_token = r.token
        RETURNING j.id, j.queue, j.unique_key`.execute(trx);
      await settleReturnedKeys(trx, rows);
      return rows.length;
    }),
  );
  return released;
}
