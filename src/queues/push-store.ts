import { sql } from 'kysely';
import type { Db } from '../db/database.js';

/** A push queue's endpoint, as stored (migration 0024). */
export interface PushEndpointRow {
  queue: string;
  url: string;
  timeout_ms: number;
  concurrency: number;
  secret: string;
  previous_secret: string | null;
  previous_until: Date | null;
  secret_created_at: Date;
  created_at: Date;
  updated_at: Date;
}

export interface PushSettings {
  url: string;
  timeoutMs: number;
  concurrency: number;
}

/**
 * Set a queue's endpoint, making the queue first if need be (as a configured queue: the leader's
 * collection of idle auto-created queues must not take a push queue away). A new endpoint gets
 * `secret`; an existing one keeps its own (rotate for a new one). Answers the row and whether it is new.
 */
export async function setPushEndpoint(
  db: Db,
  queue: string,
  s: PushSettings,
  secret: string,
): Promise<{ row: PushEndpointRow; created: boolean }> {
  const { rows } = await sql<PushEndpointRow & { created: boolean }>`
    WITH q AS (
      INSERT INTO baton.queues (name, auto_created) VALUES (${queue}, false)
      ON CONFLICT (name) DO UPDATE SET auto_created = false, updated_at = now()
        WHERE baton.queues.auto_created
      RETURNING name
    )
    INSERT INTO baton.push_endpoints (queue, url, timeout_ms, concurrency, secret)
    VALUES (${queue}, ${s.url}, ${s.timeoutMs}, ${s.concurrency}, ${secret})
    ON CONFLICT (queue) DO UPDATE
      SET url = excluded.url, timeout_ms = excluded.timeout_ms, concurrency = excluded.concurrency, updated_at = now()
    RETURNING *, (xmax = 0) AS created`.execute(db);
  const { created, ...row } = rows[0]!;
  return { row, created };
}

export async function readPushEndpoint(db: Db, queue: string): Promise<PushEndpointRow | undefined> {
  const { rows } =
    await sql<PushEndpointRow>`SELECT * FROM baton.push_endpoints WHERE queue = ${queue}`.execute(db);
  return rows[0];
}

/** Every push endpoint: what each replica's dispatcher serves (a handful of rows, read every few seconds). */
export async function listPushEndpoints(db: Db): Promise<PushEndpointRow[]> {
  const { rows } = await sql<PushEndpointRow>`SELECT * FROM baton.push_endpoints ORDER BY queue`.execute(db);
  return rows;
}

export async function deletePushEndpoint(db: Db, queue: string): Promise<boolean> {
  const result = await sql`DELETE FROM baton.push_endpoints WHERE queue = ${queue}`.execute(db);
  return Number(result.numAffectedRows ?? 0) > 0;
}

/** A new secret; the one it replaces keeps signing for `overlapMs`. Undefined when the queue has no endpoint. */
export async function rotatePushSecret(
  db: Db,
  queue: string,
  secret: string,
  overlapMs: number,
): Promise<PushEndpointRow | undefined> {
  const { rows } = await sql<PushEndpointRow>`
    UPDATE baton.push_endpoints
    SET previous_secret = secret, previous_until = now() + ${overlapMs}::bigint * interval '1 millisecond',
        secret = ${secret}, secret_created_at = now(), updated_at = now()
    WHERE queue = ${queue}
    RETURNING *`.execute(db);
  return rows[0];
}
