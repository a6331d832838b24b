import { type RawBuilder, sql } from 'kysely';
import type { Db } from '../db/database.js';
import { StatementShapes } from '../db/statement-shapes.js';
import { type AckItem, completed } from './ack.js';
import { type Claimant, type ClaimedRow, claimedFromAssigned, limited } from './claim.js';
import {
  claimOrder,
  compareClaimOrder,
  finishedJobColumns,
  type JobRow,
  leaseHeld,
  notExpired,
} from './job-row.js';
import { retryWhenMoved, slotsOf } from './ring.js';

/**
 * Ack-and-claim in one statement: a worker acks its job (or its batch) and asks for the next ones of
 * the same queue (`next` on the ack or the batch ack). Run as an ack and then a claim, that is two
 * statements and two commits per request, and each request waits for its ack's statement group and
 * then for a claim group, one after the other (docs/benchmarks.md, issue 17). Here the ack's DELETE
 * and history INSERT and the claim's pick and UPDATE are data-modifying CTEs of one statement: one
 * commit for both.
 *
 * The claim part serves only what the plain claim serves: a queue that is not paused and not under
 * flow control (grouped or limited), each acked job's own queue, with the queue's lease and budget.
 * The rest is left to the caller: an ack that matched nothing here (lease lost, already acked, or a
 * job the leader carried to another slot) goes through the ack path, and a claim that got no job
 * (queue empty, paused, under flow control, or a long-poll to wait for) through the claim path. Since the
 * statement is atomic, nothing of it happened when it fails, and the caller can take those paths then
 * too: the ack is never lost to the claim.
 *
 * Several requests share one statement (statement-groups.ts), whatever their queues: the acked rows
 * say which queues, each queue's jobs are picked once for all its claimants (FOR UPDATE SKIP LOCKED,
 * in claim order, as the plain claim) and dealt out in the claimants' order.
 */

/** One request: its acks (one for a single ack, several for a batch) and its claim of next jobs. */
export interface AckAndClaimRequest {
  acks: AckItem[];
  next: Claimant;
  /** What to read back of an acked job: all of it (single ack) or what the batch answer needs. */
  answer: AckAnswer;
}

export interface AckAndClaimOutcome {
  /** Each ack's completed job, in the request's order; undefined where this statement did not ack it. */
  jobs: (JobRow | undefined)[];
  /** The next jobs claimed for this request (empty when none, or when none of its acks happened here). */
  next: ClaimedRow[];
}

type AckAnswer = 'job' | 'brief';

type Values = [
  ids: string[],
  tokens: string[],
  results: (string | null)[],
  requestOfAck: number[],
  slots: number[],
  maxJobs: number[],
  leaseMs: (number | null)[],
  workerIds: (string | null)[],
  defaultLeaseMs: number,
];

/**
 * Ack and claim for several requests in one statement (grouped: statement-groups.ts). All requests of
 * one call read back the same answer shape.
 */
export async function ackAndClaimEach(
  db: Db,
  defaultLeaseMs: number,
  requests: AckAndClaimRequest[],
): Promise<AckAndClaimOutcome[]> {
  const acks = requests.flatMap((r) => r.acks);
  const values: Values = [
    acks.map((a) => a.id),
    acks.map((a) => a.leaseToken),
    acks.map((a) => a.resultJson ?? null),
    requests.flatMap((r, i) => r.acks.map(() => i + 1)),
    slotsOf(acks.map((a) => a.id)),
    requests.map((r) => r.next.maxJobs),
    requests.map((r) => r.next.leaseMs ?? null),
    requests.map((r) => r.next.workerId ?? null),
    defaultLeaseMs,
  ];
  const answer = requests[0]?.answer ?? 'job';
  const { rows } = await retryWhenMoved(() => statement.execute(db, answer, values));
  const next: ClaimedRow[][] = requests.map(() => []);
  const acked = new Map<string, JobRow>();
  for (const row of rows) {
    if (row.claimant === null) acked.set(`${row.id}:${row.ack_token}`, row);
    else next[Number(row.claimant) - 1]!.push(row);
  }
  return requests.map((r, i) => ({
    jobs: r.acks.map((a) => acked.get(`${a.id}:${a.leaseToken}`)),
    next: next[i]!.sort(compareClaimOrder),
  }));
}

/** A row of the statement: an acked job (claimant null) or a claimed one (claimant: the item, from 1). */
type Row = JobRow &
  ClaimedRow & { claimant: string | null; ack_token: string | null; payload_json: string | null };

/** Compiled once per answer shape; acks look in their id's slot only (a carried job is left to the ack path). */
const statement = new StatementShapes((answer: AckAnswer, ...values: Values) =>
  ackAndClaimSql(answer, values),
);

/** What an acked row reads back: the whole job, or its id, queue and times (the rest NULL). */
const ACKED_COLUMNS: Record<AckAnswer, RawBuilder<unknown>> = {
  job: finishedJobColumns,
  brief: sql`h.id, h.queue, NULL::text AS group_key, NULL::text AS state, NULL::integer AS priority,
    NULL::timestamptz AS run_at, NULL::integer AS attempts, NULL::integer AS max_attempts,
    NULL::text AS idempotency_key, NULL::timestamptz AS created_at, h.claimed_at,
    NULL::timestamptz AS lease_expires_at, NULL::text AS worker_id, h.finished_at, NULL::jsonb AS result,
    NULL::jsonb AS last_error, NULL::jsonb AS errors, NULL::text AS dead_reason, NULL::jsonb AS payload,
    NULL::jsonb AS meta, NULL::integer AS timeout_ms, NULL::timestamptz AS deadline_at,
    NULL::timestamptz AS expires_at, NULL::text AS unique_key`,
};

function ackAndClaimSql(
  answer: AckAnswer,
  [ids, tokens, results, requestOfAck, slots, maxJobs, leaseMs, workerIds, defaultLeaseMs]: Values,
) {
  const idList = sql`${ids}::bigint[]`;
  const at = sql`array_position(${idList}, j.id)`;
  return sql<Row>`
    WITH claimants AS (
      SELECT c.claimant, c.n, c.lease_ms, c.worker_id
      FROM unnest(${maxJobs}::integer[], ${leaseMs}::integer[], ${workerIds}::text[])
           WITH ORDINALITY AS c(n, lease_ms, worker_id, claimant)
    ), done AS (
      -- The ack, as ack.ts writes it: the ids' own partitions, each row matched to its ack by position.
      DELETE FROM baton.jobs j
      WHERE j.id = ANY(${idList}) AND j.slot = ANY(${slots}::smallint[]) AND ${leaseHeld('j', sql`(${tokens}::uuid[])[${at}]`)}
      RETURNING j.*, nullif(((${results}::text[])[${at}])::jsonb, 'null'::jsonb) AS result,
                (${requestOfAck}::integer[])[${at}] AS request
    ), finished AS (
      INSERT INTO baton.job_history AS h (${completed.columns})
      SELECT ${completed.values} FROM done
      RETURNING ${ACKED_COLUMNS[answer]}, h.ack_token
    ), wanted AS (
      -- Who claims from which queue: each request with an ack that went through, in the queue of its
      -- first acked job (a batch's are all of one queue: the route checks), numbered within its queue.
      SELECT r.queue, c.claimant, c.n, c.lease_ms, c.worker_id,
             sum(c.n) OVER (PARTITION BY r.queue ORDER BY c.claimant) AS upto
      FROM (SELECT DISTINCT ON (d.request) d.request, d.queue FROM done d ORDER BY d.request, d.id) r
      JOIN claimants c ON c.claimant = r.request
    ), settings AS (
      SELECT w.queue, sum(w.n) AS total, coalesce(bool_or(q.paused), false) AS paused,
             coalesce(max(q.lease_ms), ${defaultLeaseMs}::integer) AS lease_ms, max(q.timeout_ms) AS timeout_ms,
             coalesce(bool_or(q.grouped OR ${limited('q')}), false) AS flow
      FROM wanted w LEFT JOIN baton.queues q ON q.name = w.queue
      GROUP BY w.queue
    ), picked AS (
      SELECT s.queue, p.slot, p.id, p.priority, p.run_at
      FROM settings s CROSS JOIN LATERAL (
        SELECT j.slot, j.id, j.priority, j.run_at FROM baton.jobs j
        WHERE j.queue = s.queue AND j.state = 'ready' AND NOT s.paused AND NOT s.flow AND ${notExpired('j')}
        ORDER BY ${claimOrder('j')}
        LIMIT s.total
        FOR UPDATE SKIP LOCKED
      ) p
    ), assigned AS (
      SELECT p.id, p.slot, w.claimant, coalesce(w.lease_ms, s.lease_ms) AS lease_ms, w.worker_id, s.timeout_ms,
             clock_timestamp() AS at
      FROM (SELECT *, row_number() OVER (PARTITION BY queue ORDER BY ${claimOrder('picked')}) AS rn FROM picked) p
      JOIN wanted w ON w.queue = p.queue AND p.rn > w.upto - w.n AND p.rn <= w.upto
      JOIN settings s ON s.queue = p.queue
    ), ${claimedFromAssigned}
    SELECT f.*, NULL::bigint AS claimant, NULL::text AS payload_json, NULL::uuid AS lease_token FROM finished f
    UNION ALL
    SELECT c.id, c.queue, c.group_key, 'claimed', c.priority, c.run_at, c.attempts, c.max_attempts, NULL, c.created_at,
           c.claimed_at, c.lease_expires_at, NULL, NULL, NULL, NULL, NULL, NULL, NULL, c.meta, NULL, c.deadline_at,
           NULL, NULL, NULL, c.claimant, c.payload_json, c.lease_token
    FROM claimed c`;
}
