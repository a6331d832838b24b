import { sql } from 'kysely';
import type { Db } from '../../db/database.js';
import { StatementShapes } from '../../db/statement-shapes.js';
import { type AckItem, completed, completedWithProgress } from '../ack.js';
import {
  claimOrder,
  finishedJobColumns,
  givenProgress,
  inScope,
  type JobRow,
  jobRowColumns,
} from '../job-row.js';
import { inSlotOf, retryWhenMoved } from '../ring.js';
import {
  claimedColumns,
  claimedFromAssigned,
  claimedValuesOf,
  dealt,
  lockReady,
  namedColumns,
  queueClaimSettings,
} from './statement.js';
import type { Claimant, ClaimedRow } from './types.js';

/**
 * Ack-and-claim in one statement: a worker that takes one job at a time acks it and asks for the next
 * ones of the same queue (`next` on the ack). Run as an ack and then a claim, that is two statements
 * and two commits per job, and each request waits for its ack's statement group and then for a claim
 * group, one after the other (docs/adr/0007-group-commit.md; docs/benchmarks.md, "What was tried and
 * what it gave", row "Ack-and-claim in one statement"). Here the ack's DELETE and history INSERT and
 * the claim's pick and UPDATE are data-modifying CTEs of one statement: one commit for both.
 *
 * The claim part serves only what the plain claim serves: a queue that is not paused and not under
 * flow control (grouped or limited), each acked job's own queue, with the queue's lease and budget.
 * The rest is left to the caller: an item whose ack matched nothing here (lease lost, already acked,
 * or a job the leader carried to another slot) or whose claim got no job (queue empty, paused, under
 * flow control, or a long-poll to wait for) goes through the ack and claim paths as before. Since the
 * statement is atomic, nothing of it happened when it fails, and the caller can take those paths then
 * too: the ack is never lost to the claim.
 *
 * Several requests share one statement (statement-groups.ts), whatever their queues: the acked rows
 * say which queues, each queue's jobs are picked once for all its claimants (FOR UPDATE SKIP LOCKED,
 * in claim order, as the plain claim) and dealt out in the claimants' order.
 *
 * An ack carrying the worker's final progress goes through the variant that writes it (its own
 * shape, one more array of values); a statement none of whose acks carries progress is the one it
 * always was.
 */

export interface AckAndClaimItem extends AckItem {
  next: Claimant;
}

export interface AckAndClaimOutcome {
  /** The completed job; undefined when this statement did not ack it (see above). */
  job?: JobRow;
  /** The next jobs claimed for this item (empty when none, or when the ack did not happen here). */
  next: ClaimedRow[];
}

type Values = [
  ids: string[],
  tokens: string[],
  results: (string | null)[],
  maxJobs: number[],
  leaseMs: (number | null)[],
  workerIds: (string | null)[],
  queues: (string | null)[],
  defaultLeaseMs: number,
];

export async function ackAndClaimEach(
  db: Db,
  defaultLeaseMs: number,
  items: AckAndClaimItem[],
): Promise<AckAndClaimOutcome[]> {
  const values: Values = [
    items.map((i) => i.id),
    items.map((i) => i.leaseToken),
    items.map((i) => i.resultJson ?? null),
    items.map((i) => i.next.maxJobs),
    items.map((i) => i.next.leaseMs ?? null),
    items.map((i) => i.next.workerId ?? null),
    items.map((i) => i.queue ?? null),
    defaultLeaseMs,
  ];
  const { rows } = await retryWhenMoved(() =>
    items.some((i) => i.progressJson !== undefined)
      ? progressStatement.execute(db, 'own slot', [...values, items.map((i) => i.progressJson ?? null)])
      : statement.execute(db, 'own slot', values),
  );
  const acked = new Map<string, JobRow>();
  for (const row of rows) if (row.claimant === null) acked.set(`${row.id}:${row.ack_token}`, row);
  const next = dealt(
    rows,
    items.map((i) => i.next),
  );
  return items.map((item, i) => ({ job: acked.get(`${item.id}:${item.leaseToken}`), next: next[i]! }));
}

/** A row of the statement: an acked job (claimant null) or a claimed one (claimant: the item, from 1). */
type Row = JobRow &
  ClaimedRow & { claimant: string | null; ack_token: string | null; payload_json: string | null };

/**
 * The statement's answer, column by column: an acked job's (a JobRow, as `finished` returns it, and the
 * token that acked it), then a claimed job's (statement.ts's claimedColumns; those a JobRow has are
 * listed once, where the JobRow has them). A row answers its own columns, and NULL for the others.
 */
const answerColumns = { ...jobRowColumns, ack_token: 'uuid', ...claimedColumns } as const;
const ackedValues = Object.fromEntries(
  [...Object.keys(jobRowColumns), 'ack_token'].map((c) => [c, `f.${c}`]),
);
const claimedValues = { ...claimedValuesOf('c'), state: "'claimed'" };

/** One shape: acks look in their id's slot only (a carried job is left to the ack path). */
const statement = new StatementShapes((_shape: 'own slot', ...values: Values) => ackAndClaimSql(values));

/** With each item's progress as JSON text (null: keep the job's). */
type ProgressValues = [...Values, progress: (string | null)[]];

/** The same statement writing the acks' progress, for groups in which some ack carries it. */
const progressStatement = new StatementShapes(
  (
    _shape: 'own slot',
    ...[ids, tokens, results, maxJobs, leaseMs, workers, queues, lease, progress]: ProgressValues
  ) => ackAndClaimSql([ids, tokens, results, maxJobs, leaseMs, workers, queues, lease], progress),
);

function ackAndClaimSql(
  [ids, tokens, results, maxJobs, leaseMs, workerIds, queues, defaultLeaseMs]: Values,
  progress?: (string | null)[],
) {
  // Without progress, the statement's text is the one it always was.
  const [progressColumn, progressInput, progressName, ackedProgress] = progress
    ? [
        sql`, i.progress`,
        sql`, ${progress}::text[]`,
        sql`, progress`,
        sql`,
                ${givenProgress(sql`i.progress`, sql`j.progress`)} AS acked_progress`,
      ]
    : [sql``, sql``, sql``, sql``];
  const row = progress ? completedWithProgress : completed;
  return sql<Row>`
    WITH input AS (
      SELECT i.id, i.token, nullif(i.result::jsonb, 'null'::jsonb) AS result, i.n, i.lease_ms, i.worker_id, i.queue,
             i.ord${progressColumn}
      FROM unnest(${ids}::bigint[], ${tokens}::uuid[], ${results}::text[], ${maxJobs}::integer[],
                  ${leaseMs}::integer[], ${workerIds}::text[], ${queues}::text[]${progressInput})
           WITH ORDINALITY AS i(id, token, result, n, lease_ms, worker_id, queue${progressName}, ord)
    ), done AS (
      -- The ack's DELETE, joined to its few items on id and token in each id's own partition (ack.ts
      -- matches a batch by position instead; here that measured slower: docs/benchmarks.md, "What was
      -- tried and what it gave", row "Single ack-and-claim matched by position").
      DELETE FROM baton.jobs j USING input i
      WHERE j.id = ANY(${ids}::bigint[]) AND ${inSlotOf('j', sql`i.id`)} AND j.id = i.id AND j.state = 'claimed'
        AND j.lease_token = i.token AND ${inScope('j', sql`i.queue`)}
      RETURNING j.*, i.result, i.ord AS next_claimant, i.n AS next_n, i.lease_ms AS next_lease_ms,
                i.worker_id AS next_worker_id${ackedProgress}
    ), finished AS (
      INSERT INTO baton.job_history AS h (${row.columns})
      SELECT ${row.values} FROM done
      RETURNING ${finishedJobColumns}, h.ack_token
    ), wanted AS (
      -- Who claims from which queue: the items whose ack went through, numbered within their queue.
      SELECT d.queue, d.next_claimant AS claimant, d.next_n AS n, d.next_lease_ms AS lease_ms,
             d.next_worker_id AS worker_id, sum(d.next_n) OVER (PARTITION BY d.queue ORDER BY d.next_claimant) AS upto
      FROM done d
    ), settings AS (
      SELECT w.queue, sum(w.n) AS total, ${queueClaimSettings('q', defaultLeaseMs)}
      FROM wanted w LEFT JOIN baton.queues q ON q.name = w.queue
      GROUP BY w.queue
    ), picked AS (
      SELECT s.queue, p.slot, p.id, p.priority, p.run_at
      FROM settings s CROSS JOIN LATERAL (${lockReady({
        queue: sql`s.queue`,
        where: sql`NOT s.paused AND NOT s.flow`,
        limit: sql`s.total`,
      })}
      ) p
    ), assigned AS (
      SELECT p.id, p.slot, w.claimant, coalesce(w.lease_ms, s.lease_ms) AS lease_ms, w.worker_id, s.timeout_ms,
             clock_timestamp() AS at
      FROM (SELECT *, row_number() OVER (PARTITION BY queue ORDER BY ${claimOrder('picked')}) AS rn FROM picked) p
      JOIN wanted w ON w.queue = p.queue AND p.rn > w.upto - w.n AND p.rn <= w.upto
      JOIN settings s ON s.queue = p.queue
    ), ${claimedFromAssigned}
    SELECT ${namedColumns(answerColumns, ackedValues, '           ')}
    FROM finished f
    UNION ALL
    SELECT ${namedColumns(answerColumns, claimedValues, '           ')}
    FROM claimed c`;
}
