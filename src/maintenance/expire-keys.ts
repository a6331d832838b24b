import { sql } from 'kysely';
import type { Db } from '../db/database.js';
import type { Metrics } from '../metrics/metrics.js';
import { type Duty, MAINTENANCE_BATCH } from './duty.js';

/**
 * Expire idempotency keys past their retention, in bounded batches (oldest first, by the
 * expires_at index). A key past expires_at is already ignored by enqueue (it may be reused at once);
 * this only reclaims the space. SKIP LOCKED: a key an enqueue is re-using right now is left to it.
 */
export async function expireIdempotencyKeys(db: Db, batchSize: number): Promise<number> {
  const result = await sql`
    DELETE FROM baton.idempotency_keys k
    USING (
      SELECT queue, key FROM baton.idempotency_keys
      WHERE expires_at < now()
      ORDER BY expires_at
      LIMIT ${batchSize}
      FOR UPDATE SKIP LOCKED
    ) old
    WHERE k.queue = old.queue AND k.key = old.key AND k.expires_at < now()`.execute(db);
  return Number(result.numAffectedRows ?? 0);
}

export class ExpireKeysDuty implements Duty<number> {
  readonly name = 'expire_keys';
  constructor(
    private readonly db: Db,
    private readonly metrics: Metrics,
    private readonly tickMs: number,
    private readonly batchSize = MAINTENANCE_BATCH,
  ) {}

  async runOnce(): Promise<number> {
    const expired = await expireIdempotencyKeys(this.db, this.batchSize);
    this.metrics.keysExpired.inc(expired);
    return expired;
  }

  nextRunInMs(last: number | undefined): number {
    return last !== undefined && last >= this.batchSize ? 0 : this.tickMs;
  }
}
