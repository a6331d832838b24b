import { type RawBuilder, sql } from 'kysely';
import type { Db } from '../db/database.js';
import { StatementShapes } from '../db/statement-shapes.js';
import {
  finishedJobColumns,
  finishedRow,
  givenProgress,
  inScope,
  type JobRow,
  leaseHeld,
} from './job-row.js';
import type { ScopedId } from './lease-outcome.js';
import { inSlotShape, retryWhenMoved, type SlotShape, slotShapeOf } from './ring.js';

/**
 * Ack: the worker holding the current lease says the job is done. The job leaves the live table and
 * lands in job_history as `completed`, with the worker's result, in one statement.
 *
 * Every ack names the job and its lease token; the DELETE matches only a row still `claimed` under
 * that token. A stale worker (its lease expired and the job went to someone else) matches nothing.
 * If the leader is re-arming the row at this very moment, the DELETE waits for that to commit,
 * re-checks the row, and matches nothing either. A batch of acks is the same statement over many
 * rows; each item's outcome is reported separately. Repeating an ack of the same lease (after a lost
 * answer) is recognised by alreadyAcked() and answered as a success, so acks are safe to retry.
 *
 * Concurrent acks share these statements (AckGroups in statement-groups.ts, which also answers a
 * repeated ack through alreadyAcked below).
 *
 * An ack may carry the worker's final progress, kept on the completed job. Only a statement in which
 * some item carries it runs the variant that writes it (ackProgressStatements, the same DELETE and
 * INSERT with one more array of values); an ack without progress sends the statement it always did,
 * and the job keeps the progress its last renewal reported.
 */

export interface AckItem extends ScopedId {
  leaseToken: string;
  /** The result as JSON text, or undefined for none. */
  resultJson?: string;
  /** The final progress as JSON text ('null' clears it); undefined keeps what the job has. */
  progressJson?: string;
}

export type AckedJob = Pick<JobRow, 'id' | 'queue' | 'claimed_at' | 'finished_at'>;

/**
 * Ack each item; answers, item by item, the completed job or undefined when the lease was not
 * this item's. Rows are matched on id and token, so two items naming the same job with different
 * tokens (two workers, one stale) cannot both be answered with the one that won.
 */
export function ackEach(db: Db, acks: AckItem[]): Promise<(JobRow | undefined)[]> {
  return ackByLease<JobRow>(db, acks, 'job');
}

/**
 * The same ack, answering only what the batch route needs (which items were acked, and for the
 * metrics their queue and times). Not reading back every finished row (payload, result, errors)
 * saves PostgreSQL the output conversion and the server the parsing of rows it would throw away.
 */
export function ackBriefEach(db: Db, acks: AckItem[]): Promise<(AckedJob | undefined)[]> {
  return ackByLease<AckedJob>(db, acks, 'brief');
}

/**
 * Each ack looks for its job in the slot of its id first (when the batch's ids share one, ring.ts's
 * SlotShape); the few it misses look again in every slot, since the leader may have carried a
 * long-running job (ring.ts).
 */
async function ackByLease<R extends { id: string }>(
  db: Db,
  acks: AckItem[],
  answer: AckAnswer,
): Promise<(R | undefined)[]> {
  const byLease = new Map<string, R>();
  const run = async (items: AckItem[], slots: SlotShape) => {
    const values: AckValues = [
      items.map((a) => a.id),
      items.map((a) => a.leaseToken),
      items.map((a) => a.resultJson ?? null),
      items.map((a) => a.queue ?? null),
    ];
    const { rows } = (await retryWhenMoved(() =>
      items.some((a) => a.progressJson !== undefined)
        ? ackProgressStatements.execute(db, `${answer}:${slots}`, [
            ...values,
            items.map((a) => a.progressJson ?? null),
          ])
        : ackStatements.execute(db, `${answer}:${slots}`, values),
    )) as {
      rows: (R & { ack_token: string })[];
    };
    // The row keeps its ack_token column (not copied without it: that cost an object per job).
    for (const row of rows) byLease.set(`${row.id}:${row.ack_token}`, row);
  };
  const lease = (a: AckItem) => `${a.id}:${a.leaseToken}`;
  for (const part of withDistinctIds(acks)) {
    const slots = slotShapeOf(part.map((a) => a.id));
    await run(part, slots);
    const missed = part.filter((a) => !byLease.has(lease(a)));
    if (missed.length > 0 && slots !== 'any') await run(missed, 'any');
  }
  return acks.map((a) => byLease.get(lease(a)));
}

/**
 * The acks in parts within which no id repeats: the statement matches a row to the first item of its
 * id (array_position). An id repeats only when concurrent single acks name one job (two workers, one
 * of them stale), so nearly always there is one part.
 */
function withDistinctIds(acks: AckItem[]): AckItem[][] {
  const parts: AckItem[][] = [];
  const seen = new Map<string, number>();
  for (const ack of acks) {
    const n = seen.get(ack.id) ?? 0;
    seen.set(ack.id, n + 1);
    if (n === parts.length) parts.push([]);
    parts[n]!.push(ack);
  }
  return parts;
}

/** Completed: with the worker's result, and the lease token that completed it (for retried acks). */
export const completed = finishedRow('completed', { result: sql`result`, ackToken: sql`lease_token` });

/**
 * Completed, with the progress the ack carried (column `acked_progress` of the deleted rows: the
 * report, or the job's own when the item sent none).
 */
export const completedWithProgress = finishedRow('completed', {
  result: sql`result`,
  ackToken: sql`lease_token`,
  progress: sql`acked_progress`,
});

/** What an ack reads back: the whole finished job (single ack), or what the batch ack needs. */
type AckAnswer = 'job' | 'brief';
const ANSWER_COLUMNS: Record<AckAnswer, RawBuilder<unknown>> = {
  job: finishedJobColumns,
  brief: sql`h.id, h.queue, h.claimed_at, h.finished_at`,
};

/** The ack statement's values by item: ids, lease tokens, result texts (null for none), scopes. */
type AckValues = [ids: string[], tokens: string[], results: (string | null)[], queues: (string | null)[]];

/** With each item's progress as JSON text (null: keep the job's). */
type AckProgressValues = [...AckValues, progress: (string | null)[]];

/** Compiled once per answer and slot (db/statement-shapes.ts, ring.ts's SlotShape). */
const ackStatements = new StatementShapes((shape: `${AckAnswer}:${SlotShape}`, ...values: AckValues) => {
  const [answer, slots] = shape.split(':') as [AckAnswer, SlotShape];
  return ackStatement(values, slots, sql`${ANSWER_COLUMNS[answer]}, h.ack_token`);
});

/** The same ack writing the progress too, for statements in which some item carries it. */
const ackProgressStatements = new StatementShapes(
  (shape: `${AckAnswer}:${SlotShape}`, ...[ids, tokens, results, queues, progress]: AckProgressValues) => {
    const [answer, slots] = shape.split(':') as [AckAnswer, SlotShape];
    return ackStatement(
      [ids, tokens, results, queues],
      slots,
      sql`${ANSWER_COLUMNS[answer]}, h.ack_token`,
      progress,
    );
  },
);

function ackStatement(
  [ids, tokens, results, queues]: AckValues,
  slots: SlotShape,
  returning: RawBuilder<unknown>,
  progress?: (string | null)[],
) {
  // The DELETE probes the primary key of the batch's slot (every slot's, for 'any') for its ids
  // (`j.id = ANY`), and each row found is matched to its item by position (array_position), not by a join with
  // the items. Joined, the ring's partitions (truncated and refilled all the time, so their statistics
  // say "almost empty") got a nested loop comparing every item with every row the scan returned: with
  // the state in the WHERE, every claimed row of the partition (jobs_claimed_idx); matched by position
  // it costs less than half (docs/benchmarks.md, "What was tried and what it gave", row "Batch ack
  // matched by position"). An id named twice (two single acks of one job, one stale) matches its first
  // item only; the other is tried again in the next pass (ackByLease).
  const idList = sql`${ids}::bigint[]`;
  const at = sql`array_position(${idList}, j.id)`;
  // Without progress, the statement's text is the ack's as it always was.
  const ackedProgress = progress
    ? sql`,
               ${givenProgress(sql`(${progress}::text[])[${at}]`, sql`j.progress`)} AS acked_progress`
    : sql``;
  const row = progress ? completedWithProgress : completed;
  return sql`
    WITH done AS (
      DELETE FROM baton.jobs j
      WHERE j.id = ANY(${idList}) AND ${inSlotShape('j', slots)} AND ${leaseHeld('j', sql`(${tokens}::uuid[])[${at}]`)}
        AND ${inScope('j', sql`(${queues}::text[])[${at}]`)}
      RETURNING j.*, nullif(((${results}::text[])[${at}])::jsonb, 'null'::jsonb) AS result${ackedProgress}
    )
    INSERT INTO baton.job_history AS h (${row.columns})
    SELECT ${row.values} FROM done
    RETURNING ${returning}`;
}

/**
 * Acks that already happened: jobs completed under exactly these lease tokens. A client whose ack
 * committed but whose answer was lost retries with the same token; that is the same ack, not a
 * second one, and it is answered as a success.
 */
export async function alreadyAcked(
  db: Db,
  acks: Pick<AckItem, 'id' | 'leaseToken' | 'queue'>[],
): Promise<Map<string, JobRow>> {
  if (acks.length === 0) return new Map();
  const { rows } = await sql<JobRow>`
    SELECT ${finishedJobColumns} FROM baton.job_history h
    JOIN unnest(${acks.map((a) => a.id)}::bigint[], ${acks.map((a) => a.leaseToken)}::uuid[],
                ${acks.map((a) => a.queue ?? null)}::text[]) AS a(id, token, queue)
      ON h.id = a.id AND h.ack_token = a.token AND ${inScope('h', sql`a.queue`)}
    WHERE h.state = 'completed'`.execute(db);
  return new Map(rows.map((r) => [r.id, r]));
}
