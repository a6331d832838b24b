import { type RawBuilder, sql } from 'kysely';
import type { Db } from '../db/database.js';
import { StatementShapes } from '../db/statement-shapes.js';
import { finishedJobColumns, finishedRow, type JobRow } from './job-row.js';
import { type LeaseOutcome, outcomesOf } from './lease-outcome.js';
import { anySlot, inSlotOf, retryWhenMoved } from './ring.js';
import type { AckGroups } from './statement-groups.js';

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
 */

export interface AckItem {
  id: string;
  leaseToken: string;
  /** The result as JSON text, or undefined for none. */
  resultJson?: string;
}

export type AckedJob = Pick<JobRow, 'id' | 'queue' | 'claimed_at' | 'finished_at'>;

/**
 * Ack one job through the shared statement (statement-groups.ts). A repeated ack of a lease that
 * already completed the job (its answer was lost) is the same ack, answered with the job again.
 */
export async function ackJob(db: Db, groups: AckGroups, item: AckItem): Promise<LeaseOutcome<JobRow>> {
  const job = (await groups.ack(item)) ?? (await alreadyAcked(db, [item])).get(item.id);
  return (await outcomesOf(db, [item.id], new Map(job ? [[item.id, job]] : [])))[0]!;
}

/** Ack a batch through the shared statement; each item's outcome, repeated acks counted as done. */
export async function ackJobs(
  db: Db,
  groups: AckGroups,
  items: AckItem[],
): Promise<LeaseOutcome<AckedJob>[]> {
  const answers = await groups.ackBatch(items);
  const done = new Map<string, AckedJob>(answers.flatMap((a) => (a ? [[a.id, a] as const] : [])));
  for (const [id, job] of await alreadyAcked(
    db,
    items.filter((i) => !done.has(i.id)),
  )) {
    done.set(id, job);
  }
  return outcomesOf(
    db,
    items.map((i) => i.id),
    done,
  );
}

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
 * Each ack looks for its job in the slot of its id first (one partition probed); the few it misses
 * look again in every slot, since the leader may have carried a long-running job (ring.ts).
 */
async function ackByLease<R extends { id: string }>(
  db: Db,
  acks: AckItem[],
  answer: AckAnswer,
): Promise<(R | undefined)[]> {
  const byLease = new Map<string, R>();
  const run = async (items: AckItem[], where: 'own slot' | 'any slot') => {
    const values: AckValues = [
      items.map((a) => a.id),
      items.map((a) => a.leaseToken),
      items.map((a) => a.resultJson ?? null),
    ];
    const { rows } = (await retryWhenMoved(() =>
      ackStatements.execute(db, `${answer}:${where}`, values),
    )) as { rows: (R & { ack_token: string })[] };
    // The row keeps its ack_token column (not copied without it: that cost an object per job).
    for (const row of rows) byLease.set(`${row.id}:${row.ack_token}`, row);
  };
  const lease = (a: AckItem) => `${a.id}:${a.leaseToken}`;
  await run(acks, 'own slot');
  const missed = acks.filter((a) => !byLease.has(lease(a)));
  if (missed.length > 0) await run(missed, 'any slot');
  return acks.map((a) => byLease.get(lease(a)));
}

/** Completed: with the worker's result, and the lease token that completed it (for retried acks). */
export const completed = finishedRow('completed', { result: sql`result`, ackToken: sql`lease_token` });

/** What an ack reads back: the whole finished job (single ack), or what the batch ack needs. */
type AckAnswer = 'job' | 'brief';
const ANSWER_COLUMNS: Record<AckAnswer, RawBuilder<unknown>> = {
  job: finishedJobColumns,
  brief: sql`h.id, h.queue, h.claimed_at, h.finished_at`,
};

/** Where an ack looks for its job: the slot of its id, or every slot (ring.ts). */
type AckWhere = 'own slot' | 'any slot';
const WHERE: Record<AckWhere, RawBuilder<unknown>> = {
  'own slot': inSlotOf('j', sql`i.id`),
  'any slot': anySlot,
};

/** The ack statement's values: ids, lease tokens, result texts (null for none), by item. */
type AckValues = [ids: string[], tokens: string[], results: (string | null)[]];

/** Compiled once per answer and slot condition (db/statement-shapes.ts). */
const ackStatements = new StatementShapes((shape: `${AckAnswer}:${AckWhere}`, ...values: AckValues) => {
  const [answer, where] = shape.split(':') as [AckAnswer, AckWhere];
  return ackStatement(values, sql`${ANSWER_COLUMNS[answer]}, h.ack_token`, WHERE[where]);
});

function ackStatement(
  [ids, tokens, results]: AckValues,
  returning: RawBuilder<unknown>,
  where: RawBuilder<unknown>,
) {
  // `j.id = ANY(ids)` makes every partition's part of the DELETE a probe of its primary key for just
  // these ids, whatever the planner believes the partitions hold. Joined to the input alone, the ring's
  // partitions (truncated and refilled all the time, so their statistics say "almost empty") got a
  // nested loop over a materialised scan of every claimed row, for each item: 100 acks with 900 jobs
  // claimed compared 90,000 pairs, and the batch ack became most of PostgreSQL's CPU per job
  // (docs/benchmarks.md, issue 17). One unnest of typed arrays also replaces two JSON arrays joined by
  // position.
  return sql`
    WITH input AS (
      SELECT i.id, i.token, nullif(i.result::jsonb, 'null'::jsonb) AS result
      FROM unnest(${ids}::bigint[], ${tokens}::uuid[], ${results}::text[]) AS i(id, token, result)
    ), done AS (
      DELETE FROM baton.jobs j USING input i
      WHERE j.id = ANY(${ids}::bigint[]) AND ${where} AND j.id = i.id AND j.state = 'claimed'
        AND j.lease_token = i.token
      RETURNING j.*, i.result
    )
    INSERT INTO baton.job_history AS h (${completed.columns})
    SELECT ${completed.values} FROM done
    RETURNING ${returning}`;
}

/**
 * Acks that already happened: jobs completed under exactly these lease tokens. A client whose ack
 * committed but whose answer was lost retries with the same token; that is the same ack, not a
 * second one, and it is answered as a success.
 */
export async function alreadyAcked(
  db: Db,
  acks: Pick<AckItem, 'id' | 'leaseToken'>[],
): Promise<Map<string, JobRow>> {
  if (acks.length === 0) return new Map();
  const { rows } = await sql<JobRow>`
    SELECT ${finishedJobColumns} FROM baton.job_history h
    JOIN unnest(${acks.map((a) => a.id)}::bigint[], ${acks.map((a) => a.leaseToken)}::uuid[]) AS a(id, token)
      ON h.id = a.id AND h.ack_token = a.token
    WHERE h.state = 'completed'`.execute(db);
  return new Map(rows.map((r) => [r.id, r]));
}
