import { type RawBuilder, sql } from 'kysely';
import { claimOrder, compareClaimOrder, notExpired } from '../job-row.js';
import type { Claimant, ClaimedRow, ClaimOutcome, HeldBack, LimitReason } from './types.js';

/**
 * The claim statement: every claim of a queue is this one statement around a pick (plain.ts,
 * grouped.ts, limited.ts; flow.ts's group shares), and ack-and-claim.ts uses its pieces. This file
 * imports no other claim file but types.ts: the picks import it, never the other way round. The
 * compiled statements are in src/jobs/sql/ (claim-*.sql).
 *
 * The pick walks a ready index (lockReady: jobs_ready_idx holds only `state = 'ready'` rows, in
 * (priority DESC, run_at, id) order), so in-flight, scheduled and finished jobs cost nothing however
 * many there are. baton.jobs is a ring of partitions (ring.ts): the walk is a Merge Append of each
 * partition's index, and the leader truncates emptied slots, so the dead entries it steps over stay few
 * even while vacuum is held back. FOR UPDATE SKIP LOCKED lets concurrent claimers pass over each other's
 * rows instead of queueing behind them, so each job goes to exactly one claimer.
 *
 * Around the pick: the queue's settings (one row, even for a queue without one), the claimants (one
 * statement claims for several, statement-groups.ts), the picked rows numbered in claim order and dealt
 * out in the claimants' order, each getting up to its maxJobs, its own lease length and worker id, and
 * the UPDATE that claims them (`claimed`), each under a fresh token. The statement answers the claimed
 * rows and, when the pick says so, one signal row (Signal, below).
 *
 * The lease length is the request's, else the queue's, else the server default; it is stored on the
 * row so that a renewal without lease_ms extends by the same length. A job with a budget per attempt
 * (its timeout_ms, else the queue's) gets deadline_at = claimed_at + budget, and its lease is capped
 * there: renewals never pass it (renew.ts) and the re-arm fails the attempt at it. The lease starts at
 * clock_timestamp(), the moment the row is claimed, not now() (the start of the transaction, which
 * on a busy server can be a little earlier than the moment a re-armed job became claimable).
 */

/**
 * What a claim statement says besides its jobs, in its one signal row (no claimant; the name in column
 * `signal`, evaluated over `settings`). A statement that served the queue as asked says nothing.
 * claim.ts's route() reads it.
 */
export const Signal = {
  /**
   * Not served: the queue needs the next, more general statement (the grouped one after the plain one,
   * the limited one after the grouped one, the walk's transaction after the limited one).
   */
  divert: 'divert',
  /** Served; the queue is not under flow control (any more), so its next claim starts plain. */
  plain: 'plain',
  /** Served; the queue is grouped, without limits or overrides, so its next claim starts grouped. */
  grouped: 'grouped',
  /** Served, with fewer jobs than asked: a limit held the claim back (the row's meta: heldBackOf). */
  heldBack: 'held_back',
} as const;
export type Signal = (typeof Signal)[keyof typeof Signal];

/**
 * The claim's answer, column by column: what CTE `claimed` returns (a ClaimedRow, and its claimant
 * from 1), in this order, with each column's type for a row that has no value for it (the signal
 * row; an acked job in ack-and-claim.ts).
 */
export const claimedColumns = {
  claimant: 'bigint',
  id: 'bigint',
  queue: 'text',
  group_key: 'text',
  payload_json: 'text',
  priority: 'integer',
  attempts: 'integer',
  max_attempts: 'integer',
  lease_token: 'uuid',
  lease_expires_at: 'timestamptz',
  deadline_at: 'timestamptz',
  claimed_at: 'timestamptz',
  run_at: 'timestamptz',
  created_at: 'timestamptz',
  meta: 'jsonb',
} as const satisfies Record<keyof ClaimedRow | 'claimant', string>;

/** A claim statement's answer: the claimed columns, and the signal (NULL but in the signal row). */
const answerColumns = { ...claimedColumns, signal: 'text' } as const;

/** A row of a claim statement: a claimed job (claimant from 1), or the signal row (claimant null). */
export type ClaimStatementRow = ClaimedRow & { claimant: string | null; signal: Signal | null };

/**
 * A select list naming every column of `columns` (name → type), in its order: the expression `values`
 * gives it (constant SQL text, never a value), else a NULL of its type. Each branch of a UNION written
 * with the same `columns` can be checked column by column, by name. Lines wrap at about 110 characters,
 * continued after `indent`.
 */
export function namedColumns(
  columns: Record<string, string>,
  values: Partial<Record<string, string>>,
  indent = '      ',
) {
  const lines: string[] = [];
  let line = '';
  for (const [name, type] of Object.entries(columns)) {
    const item = `${values[name] ?? `NULL::${type}`} AS ${name}`;
    if (line !== '' && indent.length + line.length + item.length + 2 > 110) {
      lines.push(`${line},`);
      line = item;
    } else line = line === '' ? item : `${line}, ${item}`;
  }
  lines.push(line);
  return sql.raw(lines.join(`\n${indent}`));
}

/** Each claimed column's value in `<alias>`, a row with those columns (a CTE of claimed rows). */
export const claimedValuesOf = (alias: string): Record<string, string> =>
  Object.fromEntries(Object.keys(claimedColumns).map((c) => [c, `${alias}.${c}`]));

/** What a pick puts into the claim statement (plain.ts, grouped.ts, limited.ts, flow.ts). */
export interface PickPlan {
  /** CTEs placed after `settings` and before `picked` (the statement becomes WITH RECURSIVE). */
  before?: RawBuilder<unknown>;
  /** CTE `picked`: slot, id, priority and run_at of locked ready rows, in any order. */
  pick: RawBuilder<unknown>;
  /** CTEs placed after `claimed`: a data-modifying one runs whether or not anything reads it. */
  after?: RawBuilder<unknown>;
  /** The signal row's Signal, evaluated over `settings` (NULL: no signal row). None: never a signal. */
  signal?: RawBuilder<unknown>;
  /** The signal row's meta column (default NULL). */
  signalMeta?: RawBuilder<unknown>;
}

/**
 * The claim statement around a pick: number the picked rows in claim order, deal them to the
 * claimants, claim them, and answer them and the pick's signal row (ClaimStatementRow).
 */
export function claimStatementSql(
  queue: string,
  defaultLeaseMs: number,
  claimantsJson: string,
  plan: PickPlan,
) {
  const signal = plan.signal
    ? sql`
    UNION ALL
    SELECT ${namedColumns(answerColumns, { meta: 's.meta', signal: 's.signal' }, '           ')}
    FROM (SELECT ${plan.signal} AS signal, ${plan.signalMeta ?? sql`NULL::jsonb`} AS meta FROM settings) s
    WHERE s.signal IS NOT NULL`
    : sql``;
  return sql<ClaimStatementRow>`
    WITH ${plan.before ? sql`RECURSIVE ` : sql``}settings AS (
      SELECT ${queueClaimSettings('queues', defaultLeaseMs)}, coalesce(bool_or(${limited('queues')}), false) AS limited
      FROM baton.queues WHERE name = ${queue}
    ), ${plan.before ? sql`${plan.before}, ` : sql``}picked AS (
      ${plan.pick}
    ), claimants AS (
      SELECT c.ord AS claimant, (c.item->>'n')::integer AS n, (c.item->>'lease_ms')::integer AS lease_ms,
             c.item->>'worker_id' AS worker_id, sum((c.item->>'n')::integer) OVER (ORDER BY c.ord) AS upto
      FROM json_array_elements(${claimantsJson}::json) WITH ORDINALITY AS c(item, ord)
    ), assigned AS (
      SELECT p.id, p.slot, cl.claimant, coalesce(cl.lease_ms, st.lease_ms) AS lease_ms, cl.worker_id,
             st.timeout_ms, clock_timestamp() AS at
      FROM (SELECT id, slot, row_number() OVER (ORDER BY ${claimOrder('picked')}) AS rn FROM picked) p
      JOIN claimants cl ON p.rn > cl.upto - cl.n AND p.rn <= cl.upto
      CROSS JOIN settings st
    ), ${claimedFromAssigned}${plan.after ? sql`, ${plan.after}` : sql``}
    SELECT ${namedColumns(answerColumns, claimedValuesOf('c'), '           ')}
    FROM claimed c${signal}`;
}

/** The claimants as the statement reads them; absent settings are left out (->> reads them as NULL). */
export const claimantsJsonOf = (claimants: Claimant[]) =>
  JSON.stringify(claimants.map((c) => ({ n: c.maxJobs, lease_ms: c.leaseMs, worker_id: c.workerId })));

/**
 * CTE `claimed`: the UPDATE that claims the rows of CTE `assigned` (id, slot, claimant, lease_ms,
 * worker_id, timeout_ms, at), each under a fresh token, returning `claimedColumns`. Shared by every
 * claim statement, ack-and-claim.ts's included, so a lease is computed in one place.
 *
 * Each assigned row is found by its primary key, whatever the statistics say: the ids as an array are
 * an index condition on the primary key of each partition. Joined on `j.id = a.id` alone, on the
 * ring's "almost empty" statistics the planner read every entry of an index of every partition (the
 * ready index, which the state test let it use; after an ANALYZE, the whole primary key) and matched
 * each with every assigned row: cheap while the partitions hold few row versions, 118,000 buffers a
 * claim of 50 once a reader of baton.jobs pinned 100,000 dead ones, and 0.7 s of PostgreSQL CPU per
 * 1,000 jobs in a full cycle without any reader (docs/adr/0013-claims-under-readers.md). The state
 * test is only a guard (the pick locked the row ready), written so that no partial index serves it.
 *
 * The slot range prunes the partitions the array would otherwise probe in vain, id by id: at run time
 * PostgreSQL prunes on a comparison with a subquery's value, never on `= ANY` of an array made by
 * one. Ids are drawn slot after slot (baton.job_slot), so a claim's rows sit in one slot, or two at a
 * boundary; a pick that wraps from the last slot to the first spans them all, as before.
 */
export const claimedFromAssigned = sql`claimed AS (
      UPDATE baton.jobs j SET
        state = 'claimed',
        attempts = j.attempts + 1,
        lease_token = gen_random_uuid(),
        lease_ms = a.lease_ms,
        -- The lease never runs past the attempt's deadline (least() ignores a NULL one), so the re-arm
        -- fails the attempt at its deadline.
        lease_expires_at = least(a.at + a.lease_ms * interval '1 millisecond',
                                 a.at + coalesce(j.timeout_ms, a.timeout_ms) * interval '1 millisecond'),
        deadline_at = a.at + coalesce(j.timeout_ms, a.timeout_ms) * interval '1 millisecond',
        claimed_at = a.at,
        worker_id = a.worker_id
      FROM assigned a
      WHERE j.id = ANY(ARRAY(SELECT id FROM assigned)) AND j.id = a.id AND j.slot = a.slot
        AND j.slot BETWEEN (SELECT min(slot) FROM assigned) AND (SELECT max(slot) FROM assigned)
        AND (j.state = 'ready') IS TRUE
      RETURNING ${namedColumns(
        claimedColumns,
        { ...claimedValuesOf('j'), claimant: 'a.claimant', payload_json: 'j.payload::text' },
        '                ',
      )}
    )`;

/**
 * The pick every claim is made of: ready jobs of a queue in claim order (claimOrder(), after
 * `orderFirst` when given), locked as they are read and passing over rows another claim holds (FOR
 * UPDATE SKIP LOCKED), never expired ones (notExpired(): a filter on the rows the index walk reads, so
 * the walk still stops after `limit` rows). Read off jobs_ready_idx, or jobs_group_ready_idx when
 * `orderFirst` is the group, whose order this is.
 */
export function lockReady(opts: {
  queue: RawBuilder<unknown>;
  /** Further conditions, after the queue, the state and the expiry. */
  where?: RawBuilder<unknown>;
  /** What to read of each row (default: what `picked` holds). */
  columns?: RawBuilder<unknown>;
  orderFirst?: RawBuilder<unknown>;
  offset?: RawBuilder<unknown>;
  limit: RawBuilder<unknown>;
}) {
  return sql`
    SELECT ${opts.columns ?? sql`j.slot, j.id, j.priority, j.run_at`} FROM baton.jobs j
    WHERE j.queue = ${opts.queue} AND j.state = 'ready' AND ${notExpired('j')}${opts.where ? sql` AND ${opts.where}` : sql``}
    ORDER BY ${opts.orderFirst ? sql`${opts.orderFirst}, ` : sql``}${claimOrder('j')}
    ${opts.offset ? sql`OFFSET ${opts.offset} ` : sql``}LIMIT ${opts.limit}
    FOR UPDATE SKIP LOCKED`;
}

/**
 * What a claim reads from a queue's row (alias), as aggregates so that a queue without a row still
 * answers one: paused, the lease length (the queue's, else the server default), the attempt budget,
 * and whether flow control serves it (grouped or limited). Shared by every claim statement.
 */
export function queueClaimSettings(alias: string, defaultLeaseMs: unknown) {
  const col = (c: string) => sql.ref(`${alias}.${c}`);
  return sql`coalesce(bool_or(${col('paused')}), false) AS paused,
    coalesce(max(${col('lease_ms')}), ${defaultLeaseMs}::integer) AS lease_ms,
    max(${col('timeout_ms')}) AS timeout_ms,
    coalesce(bool_or(${col('grouped')} OR ${limited(alias)}), false) AS flow`;
}

/**
 * Whether a queue row (alias) has limits. A queue is under flow control when it has limits or has
 * had jobs in groups (which are then served in turn).
 */
function limited(alias: string) {
  const q = sql.ref(alias);
  return sql`(${q}.concurrency_limit IS NOT NULL OR ${q}.rate_limit IS NOT NULL
    OR ${q}.group_concurrency_limit IS NOT NULL OR ${q}.group_rate_limit IS NOT NULL)`;
}

/** The jobs a claim wants: the sum of its claimants' maxJobs. */
export const totalOf = (claimants: Claimant[]) => claimants.reduce((n, c) => n + batchLimit(c.maxJobs), 0);

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

/** The signal row of a claim statement's answer, if any. */
export const signalRowOf = (rows: ClaimStatementRow[]) => rows.find((r) => r.signal !== null);

/**
 * Claimed rows, each claimant's in claim order (UPDATE ... RETURNING does not keep the pick's order).
 * Rows whose claimant is not a claimant (the signal row, an acked job of ack-and-claim.ts) are left out.
 */
export function dealt(
  rows: (ClaimedRow & { claimant: string | null })[],
  claimants: Claimant[],
): ClaimedRow[][] {
  const out: ClaimedRow[][] = claimants.map(() => []);
  // The row keeps its claimant column: copying every row without it cost an object per job.
  for (const row of rows) if (Number(row.claimant) > 0) out[Number(row.claimant) - 1]!.push(row);
  for (const list of out) list.sort(compareClaimOrder);
  return out;
}

/** Each claimant's jobs, held back by `heldBack` when it got fewer than it asked for. */
export function claimOutcomes(
  rows: (ClaimedRow & { claimant: string | null })[],
  claimants: Claimant[],
  heldBack?: HeldBack,
): ClaimOutcome[] {
  return dealt(rows, claimants).map((jobs, i) =>
    heldBack && jobs.length < claimants[i]!.maxJobs ? { jobs, heldBack } : { jobs },
  );
}

/** The limit baton.flow_budget named: a heldBack signal row's meta (limited.ts), or the budget's own row. */
export function heldBackOf(budget: unknown): HeldBack {
  const { reason, retry_after_ms } = budget as { reason: LimitReason; retry_after_ms: number | null };
  return retry_after_ms === null ? { reason } : { reason, retryAfterMs: retry_after_ms };
}
