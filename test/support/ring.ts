import { sql } from 'kysely';
import type { Db } from '../../src/db/database.js';
import { IDS_PER_SLOT, RING_SLOTS } from '../../src/jobs/ring.js';

/** Move the id sequence so that the next ids fall into `slot` of the ring (in a later turn of it). */
export async function drawIdsFrom(db: Db, slot: number): Promise<void> {
  const { rows } = await sql<{
    last: string;
  }>`SELECT last_value::text AS last FROM baton.jobs_id_seq`.execute(db);
  const turn = Math.floor(Number(rows[0]!.last) / (IDS_PER_SLOT * RING_SLOTS)) + 1;
  await sql`SELECT setval('baton.jobs_id_seq', ${turn * IDS_PER_SLOT * RING_SLOTS + slot * IDS_PER_SLOT})`.execute(
    db,
  );
}
