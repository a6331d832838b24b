import { sql } from 'kysely';
import type { Db } from '../db/database.js';
import { claimOrder, clearedLease, compareClaimOrder } from './job-row.js';

/**
 * Claim: hand up to `maxJobs` ready jobs of one queue to a worker, each under a fresh lease token.
 *
 * One statement. The inner SELECT walks jobs_ready_idx, the partial index that holds only
 * `state = 'ready'` rows in (priority DESC, run_at, id) order, so in-flight, scheduled and
 * finished jobs cost nothing however many there are. FOR UPDATE SKIP LOCKED lets concurrent
 * claimers pass over each other's rows instead of queueing behind them, so each job goes to exactly
 * one claimer. A paused queue yields nothing: the `paused` subquery is a one-time filter evaluated
 * before the index is touched.
 *
 * The lease length is the request's, else the queue's, else the server default; it is stored on the
 * row so that a renewal without lease_ms extends by the same length. The lease starts at
 * clock_timestamp(), the moment the row is claimed, not now() (the start of the transaction, which
 * on a busy server can be a little earlier than the moment a re-armed job became claimable).
 */

/** One claimant's part of a claim. */
export interface ClaimSlot {
  maxJobs: number;
  /** Requested lease; undefined means the queue's setting. */
  leaseMs?: number;
  workerId?: string;
}

/** A claim on a queue, as a request makes it. */
export interface ClaimRequest extends ClaimSlot {
  queue: string;
}

/** A claim on its own, with the server default lease for queues that set none. */
export interface ClaimOptions extends ClaimRequest {
  defaultLeaseMs: number;
}

export interface ClaimedRow {
  id: string;
  queue: string;
  payload: unknown;
  priority: number;
  attempts: number;
  max_attempts: number;
  lease_token: string;
  lease_expires_at: Date;
  claimed_at: Date;
  run_at: Date;
  created_at: Date;
  /** The job's metadata (baton.jobs.meta), or null. */
  meta: unknown;
}

export async function claimJobs(db: Db, opts: ClaimOptions): Promise<ClaimedRow[]> {
  return (await claimForGroup(db, opts.queue, opts.defaultLeaseMs, [opts]))[0]!;
}

/**
 * One statement claiming for several claimants of the same queue at once (see ClaimGroups): the
 * picked rows are numbered in claim order and dealt out in the claimants' order, each getting up to
 * its maxJobs, its own lease length and worker id, and a token per job. Answers each claimant's jobs.
 */
export async function claimForGroup(
  db: Db,
  queue: string,
  defaultLeaseMs: number,
  slots: ClaimSlot[],
): Promise<ClaimedRow[][]> {
  const { rows } = await claimGroupStatement(queue, defaultLeaseMs, slots).execute(db);
  const out: ClaimedRow[][] = slots.map(() => []);
  for (const { slot, ...row } of rows) out[Number(slot) - 1]!.push(row);
  // UPDATE ... RETURNING does not keep the SELECT's order; restore claim order.
  for (const list of out) list.sort(compareClaimOrder);
  return out;
}

/** The claim statement for one claimant (exported so tests and benchmarks can EXPLAIN it). */
export function claimStatement(opts: ClaimOptions) {
  return claimGroupStatement(opts.queue, opts.defaultLeaseMs, [opts]);
}

function claimGroupStatement(queue: string, defaultLeaseMs: number, slots: ClaimSlot[]) {
  const total = slots.reduce((n, s) => n + batchLimit(s.maxJobs), 0);
  // Absent settings are left out (not null): ->> reads them as NULL either way.
  const slotJson = JSON.stringify(
    slots.map((s) => ({ n: s.maxJobs, lease_ms: s.leaseMs, worker_id: s.workerId })),
  );
  return sql<ClaimedRow & { slot: string }>`
    WITH settings AS (
      SELECT coalesce(bool_or(paused), false) AS paused,
             coalesce(max(lease_ms), ${defaultLeaseMs}::integer) AS lease_ms
      FROM baton.queues WHERE name = ${queue}
    ), picked AS (
      SELECT j.id, j.priority, j.run_at FROM baton.jobs j
      WHERE j.queue = ${queue} AND j.state = 'ready' AND NOT (SELECT paused FROM settings)
      ORDER BY ${claimOrder('j')}
      LIMIT ${sql.lit(total)}
      FOR UPDATE SKIP LOCKED
    ), slots AS (
      SELECT s.ord AS slot, (s.item->>'n')::integer AS n, (s.item->>'lease_ms')::integer AS lease_ms,
             s.item->>'worker_id' AS worker_id, sum((s.item->>'n')::integer) OVER (ORDER BY s.ord) AS upto
      FROM json_array_elements(${slotJson}::json) WITH ORDINALITY AS s(item, ord)
    ), assigned AS (
      SELECT p.id, sl.slot, coalesce(sl.lease_ms, st.lease_ms) AS lease_ms, sl.worker_id
      FROM (SELECT id, row_number() OVER (ORDER BY ${claimOrder('picked')}) AS rn FROM picked) p
      JOIN slots sl ON p.rn > sl.upto - sl.n AND p.rn <= sl.upto
      CROSS JOIN settings st
    )
    UPDATE baton.jobs j SET
      state = 'claimed',
      attempts = j.attempts + 1,
      lease_token = gen_random_uuid(),
      lease_ms = a.lease_ms,
      lease_expires_at = clock_timestamp() + a.lease_ms * interval '1 millisecond',
      claimed_at = clock_timestamp(),
      worker_id = a.worker_id
    FROM assigned a
    WHERE j.id = a.id
    RETURNING a.slot, j.id, j.queue, j.payload, j.priority, j.attempts, j.max_attempts, j.lease_token,
              j.lease_expires_at, j.claimed_at, j.run_at, j.created_at, j.meta`;
}

/**
 * The LIMIT goes into the text as a literal, not a parameter. With a parameter, PostgreSQL's plan
 * cache prices a generic plan for an unknown row count, finds it dearer than a custom plan and so
 * re-plans the claim on every execution (pg_prepared_statements.generic_plans stayed 0); with the
 * literal it settles on the generic plan like every other hot statement. Clients use few distinct
 * batch sizes, so this adds few statement texts.
 */
function batchLimit(maxJobs: number): number {
  if (!Number.isSafeInteger(maxJobs) || maxJobs < 1)
    throw new Error(`maxJobs must be a positive integer, got ${maxJobs}`);
  return maxJobs;
}

/**
 * Give claimed jobs back as if never claimed: used when the client of a long-poll went away
 * before it could receive them. The attempt is not counted. Guarded by the lease token, so a job
 * already acked, re-armed or re-claimed is left alone.
 */
export async function releaseClaims(db: Db, claims: { id: string; lease_token: string }[]): Promise<number> {
  if (claims.length === 0) return 0;
  const result = await sql`
    UPDATE baton.jobs j SET state = 'ready', attempts = j.attempts - 1, ${clearedLease},
           claimed_at = NULL, worker_id = NULL
    FROM unnest(${claims.map((c) => c.id)}::bigint[], ${claims.map((c) => c.lease_token)}::uuid[]) AS r(id, token)
    WHERE j.id = r.id AND j.state = 'claimed' AND j.lease_token = r.token`.execute(db);
  return Number(result.numAffectedRows ?? 0);
}
