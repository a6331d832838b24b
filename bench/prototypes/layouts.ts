import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import type pg from 'pg';

/**
 * PROTOTYPE (issue 15). The storage layouts compared by bench/prototypes/run.ts, each as the raw SQL
 * of every statement the experiments run, plus its maintenance step. Nothing in src/ uses this.
 *
 * The statements keep the shape of Baton's own (src/jobs/claim.ts and ack.ts: a FOR UPDATE SKIP
 * LOCKED pick on the claim index, then the write; the ack matched on id and lease token, writing
 * history) but for one claimant, a fixed lease and no queue-settings read, the same for every layout.
 *
 *   single      today's baton.jobs + baton.job_history (the leader's vacuum duty as maintenance)
 *   single-nohist  the same, the ack only deleting (the share of the history write)
 *   ring1       one ring of LIST partitions by slot; claim updates in place; ack moves to history;
 *               a slot is truncated once it holds no row at all (so a long-running job pins it)
 *   ring1-carry the same, and the leader carries claimed rows (claimed over a second ago) out of a
 *               sealed slot that has no ready row left into the current slot, so the slot empties
 *   ring1-inplace  ring1-carry with the ack a HOT update in place (state completed); the leader
 *               copies a slot's completed rows to history in the transaction that truncates it
 *   ring1-nohist   ring1-carry with the ack only deleting (no history kept)
 *   ring        a ready ring and a claimed ring; claim moves the row from one to the other; ack
 *               moves it to history; the leader carries long-running claimed rows forward
 *   ring-inplace  the same rings; ack marks the row completed in place, and the leader copies a
 *               claimed slot's finished rows to history just before it truncates the slot
 *
 * Ack and renew go to one partition: in `ring1*` the slot of the id (slots are a function of the
 * id), in `ring*` the slot named by the lease token's first byte (the claimed ring's slot at claim). A row the leader has carried since is not there: the statement then
 * matches fewer items, and the caller runs `ackAnywhere` / `renewAnywhere` (every partition) for
 * the rest; a statement that waited for a row the carry was moving fails with 40001 and is retried.
 */

export const LAYOUTS = [
  'single',
  'single-nohist',
  'ring1',
  'ring1-carry',
  'ring1-inplace',
  'ring1-nohist',
  'ring',
  'ring-inplace',
] as const;
export type LayoutName = (typeof LAYOUTS)[number];

export interface RingOptions {
  slots: number;
  /** Time-based rings (`ring`, `ring-inplace`): how long a slot is current. */
  periodMs: number;
  /** Id-based rings (`ring1*`): consecutive ids per slot. */
  slotIds: number;
  /** lock_timeout of a truncation attempt. */
  lockTimeoutMs: number;
}

export interface TruncateOutcome {
  relation: string;
  outcome: 'truncated' | 'blocked' | 'busy';
  /** performance.now() at the start and end of the attempt (its transaction). */
  start: number;
  end: number;
  /** Time waiting for the ACCESS EXCLUSIVE lock. */
  lockWaitMs: number;
  /** Finished rows copied to history first (ring-inplace). */
  copied: number;
}

export interface MaintenanceResult {
  truncations: TruncateOutcome[];
  vacuums: number;
  /** Claimed rows carried out of sealed slots. */
  carried?: number;
}

export interface Layout {
  name: LayoutName;
  schema: string;
  /** DDL, placeholders substituted. */
  ddl: string;
  /** $1 queue, $2 count. */
  enqueue: string;
  /** $1 queue, $2 worker id. Returns id, lease_token. */
  claim: (n: number) => string;
  /** $1 JSON [{id, token}]. Returns one row per acked job. */
  ack: string;
  /** The ack for items the first statement did not match (a carried row): every partition. */
  ackAnywhere: string;
  /** $1 id, $2 token. */
  renew: string;
  renewAnywhere: string;
  /** $1 id: the job wherever it is (live or finished). */
  lookup: string;
  /** Relations the claim walks (heap and claim index, all partitions), for their sizes. */
  claimRelations: (client: pg.ClientBase) => Promise<string[]>;
  /** Every relation of the layout's live tables (heap + indexes), for their sizes. */
  liveRelations: (client: pg.ClientBase) => Promise<string[]>;
  /** One maintenance pass (the leader's share that matters here). */
  maintain: (pool: pg.Pool) => Promise<MaintenanceResult>;
  /** Relation name of the claim's index scan in EXPLAIN (a partition name prefix for rings). */
  scanRelation: string;
  /** Live rows left (to check a run drained). */
  live: string;
  history: string;
  /** Empty every table of the layout. */
  reset: string;
  /**
   * In-place-ack layouts: copy every finished row to history and truncate, whatever the slot (the
   * drain measurement calls it once claims are over, so the deferred copy is inside its CPU figure).
   */
  flush?: (pool: pg.Pool) => Promise<void>;
}

const SQL_DIR = resolve(import.meta.dirname, 'sql');

function template(file: string, vars: Record<string, string | number>): string {
  let text = readFileSync(resolve(SQL_DIR, file), 'utf8');
  for (const [k, v] of Object.entries(vars)) text = text.replaceAll(`{{${k}}}`, String(v));
  return text;
}

const HISTORY_COLUMNS = `id, queue, state, priority, run_at, attempts, max_attempts, worker_id, idempotency_key,
  created_at, claimed_at, finished_at, last_error, errors, result, payload, ack_token`;
const COMPLETED_VALUES = `id, queue, 'completed', priority, run_at, attempts, max_attempts, worker_id, idempotency_key,
  created_at, claimed_at, now(), last_error, errors, NULL, payload, lease_token`;
const ACK_INPUT = `input AS (
    SELECT (a->>'id')::bigint AS id, (a->>'token')::uuid AS token FROM json_array_elements($1::json) a
  )`;
const RETURNED =
  'id, queue, payload, priority, attempts, max_attempts, lease_token, lease_expires_at, claimed_at, run_at, created_at';

async function relationsLike(client: pg.ClientBase, schema: string, patterns: string[]): Promise<string[]> {
  const { rows } = await client.query<{ name: string }>(
    `SELECT format('%I.%I', n.nspname, c.relname) AS name FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = $1 AND c.relkind IN ('r', 'i') AND c.relname LIKE ANY($2::text[]) ORDER BY 1`,
    [schema, patterns],
  );
  return rows.map((r) => r.name);
}

// ---------------------------------------------------------------------------------------------
// single: today's layout. `history` false: the ack only deletes (what it costs to keep no history).

function single(history: boolean): Layout {
  const s = history ? 'single' : 'single_nohist';
  let lastVacuum = 0;
  return {
    name: history ? 'single' : 'single-nohist',
    schema: s,
    ddl: template('single.sql', { SCHEMA: s }),
    enqueue: `INSERT INTO ${s}.jobs (queue, state, priority, run_at, max_attempts, payload)
      SELECT $1, 'ready', 0, now(), 5, jsonb_build_object('i', g) FROM generate_series(1, $2::int) g`,
    claim: (n) => `
      WITH picked AS (
        SELECT j.id FROM ${s}.jobs j
        WHERE j.queue = $1 AND j.state = 'ready'
        ORDER BY j.priority DESC, j.run_at, j.id
        LIMIT ${n}
        FOR UPDATE SKIP LOCKED
      )
      UPDATE ${s}.jobs j SET state = 'claimed', attempts = j.attempts + 1, lease_token = gen_random_uuid(),
        lease_ms = 60000, lease_expires_at = clock_timestamp() + interval '60 seconds',
        claimed_at = clock_timestamp(), worker_id = $2
      FROM picked WHERE j.id = picked.id
      RETURNING j.${RETURNED.replaceAll(', ', ', j.')}`,
    ack: history
      ? `
      WITH ${ACK_INPUT}, done AS (
        DELETE FROM ${s}.jobs j USING input i
        WHERE j.id = i.id AND j.state = 'claimed' AND j.lease_token = i.token
        RETURNING j.*
      )
      INSERT INTO ${s}.job_history AS h (${HISTORY_COLUMNS})
      SELECT ${COMPLETED_VALUES} FROM done
      RETURNING h.id`
      : `
      WITH ${ACK_INPUT}
      DELETE FROM ${s}.jobs j USING input i
      WHERE j.id = i.id AND j.state = 'claimed' AND j.lease_token = i.token
      RETURNING j.id`,
    renew: `UPDATE ${s}.jobs SET lease_expires_at = clock_timestamp() + interval '60 seconds'
      WHERE id = $1 AND state = 'claimed' AND lease_token = $2::uuid RETURNING id`,
    get ackAnywhere() {
      return this.ack;
    },
    get renewAnywhere() {
      return this.renew;
    },
    lookup: `SELECT id, state FROM ${s}.jobs WHERE id = $1
      UNION ALL SELECT id, state FROM ${s}.job_history WHERE id = $1`,
    claimRelations: async () => [`${s}.jobs`, `${s}.jobs_ready_idx`],
    liveRelations: (c) => relationsLike(c, s, ['jobs%']),
    // The leader's vacuum duty (src/maintenance/vacuum.ts) at its defaults: every 5 s, VACUUM once
    // PostgreSQL counts 10,000 dead rows.
    maintain: async (pool) => {
      if (performance.now() - lastVacuum < 5_000) return { truncations: [], vacuums: 0 };
      lastVacuum = performance.now();
      const { rows } = await pool.query(
        `SELECT n_dead_tup::int AS dead FROM pg_stat_user_tables WHERE relid = '${s}.jobs'::regclass`,
      );
      if ((rows[0]?.dead ?? 0) < 10_000) return { truncations: [], vacuums: 0 };
      await pool.query(`VACUUM (SKIP_LOCKED) ${s}.jobs`);
      return { truncations: [], vacuums: 1 };
    },
    scanRelation: 'jobs',
    live: `SELECT count(*)::int AS n FROM ${s}.jobs`,
    history: history ? `SELECT count(*)::int AS n FROM ${s}.job_history` : `SELECT -1 AS n`,
    reset: `TRUNCATE ${s}.jobs, ${s}.job_history`,
  };
}

// ---------------------------------------------------------------------------------------------
// Truncating a ring slot: check without a lock, then (one transaction under lock_timeout) take
// ACCESS EXCLUSIVE, check again, optionally copy finished rows out, TRUNCATE. A lock timeout in any
// statement is `blocked` and rolls the whole attempt back; a slot found live is `busy`.

async function truncateSlot(
  pool: pg.Pool,
  relation: string,
  liveCheck: string,
  lockTimeoutMs: number,
  copyOut?: string,
): Promise<TruncateOutcome | undefined> {
  // Cheap skips first: a slot already empty on disk needs nothing, a slot with live rows waits.
  const size = await pool.query(`SELECT pg_relation_size($1::regclass)::float8 AS b`, [relation]);
  if (size.rows[0].b === 0) return undefined;
  const live = await pool.query(liveCheck);
  if (live.rows.length > 0) return undefined;
  const client = await pool.connect();
  const start = performance.now();
  let lockWaitMs = 0;
  let copied = 0;
  try {
    await client.query('BEGIN');
    await client.query(`SELECT set_config('lock_timeout', '${lockTimeoutMs}ms', true)`);
    const t = performance.now();
    await client.query(`LOCK TABLE ${relation} IN ACCESS EXCLUSIVE MODE`);
    lockWaitMs = performance.now() - t;
    const again = await client.query(liveCheck);
    if (again.rows.length > 0) {
      await client.query('ROLLBACK');
      return { relation, outcome: 'busy', start, end: performance.now(), lockWaitMs, copied };
    }
    if (copyOut) copied = (await client.query(copyOut)).rowCount ?? 0;
    await client.query(`TRUNCATE ${relation}`);
    await client.query('COMMIT');
    return { relation, outcome: 'truncated', start, end: performance.now(), lockWaitMs, copied };
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {});
    if ((err as { code?: string }).code === '55P03')
      return { relation, outcome: 'blocked', start, end: performance.now(), lockWaitMs, copied: 0 };
    throw err;
  } finally {
    client.release();
  }
}

/** Slots that are not the current one or the next (by the database clock). */
async function sealedSlots(
  pool: pg.Pool,
  schema: string,
  periodMs: number,
  slots: number,
): Promise<number[]> {
  const { rows } = await pool.query(
    `SELECT ${schema}.slot_at(clock_timestamp()) AS cur,
            ${schema}.slot_at(clock_timestamp() + ${periodMs} * interval '1 millisecond') AS nxt`,
  );
  const { cur, nxt } = rows[0];
  return Array.from({ length: slots }, (_, s) => s).filter((s) => s !== cur && s !== nxt);
}

/** Id-based rings: slots other than the one ids are drawn from now and the next. */
async function sealedIdSlots(
  pool: pg.Pool,
  schema: string,
  slotIds: number,
  slots: number,
): Promise<number[]> {
  const { rows } = await pool.query(
    `SELECT ${schema}.slot_of(last_value) AS cur, ${schema}.slot_of(last_value + ${slotIds}) AS nxt
     FROM ${schema}.job_id_seq`,
  );
  const { cur, nxt } = rows[0];
  return Array.from({ length: slots }, (_, s) => s).filter((s) => s !== cur && s !== nxt);
}

// ---------------------------------------------------------------------------------------------
// Carrying claimed rows out of a sealed slot: those claimed over a second ago (a short job in flight
// is simply waited for), taken FOR UPDATE SKIP LOCKED (a row being acked right now is left for the
// next pass), moved into the slot of the current period by an UPDATE of the partition key, lease
// token unchanged. PostgreSQL moves such a row as a delete plus an insert, and a statement that was
// waiting for the row's lock then fails with 40001 ("tuple to be locked was already moved to another
// partition") instead of silently finding nothing; the callers retry on 40001 (a DELETE + INSERT
// carry was tried first: a renew waiting for the row lost it without an error).

function carrySql(schema: string, parent: string, slot: number, target?: string): string {
  return `
    WITH picked AS (
      SELECT id FROM ${schema}.${parent}_${slot}
      WHERE state = 'claimed' AND claimed_at < clock_timestamp() - interval '1 second'
      LIMIT 1000
      FOR UPDATE SKIP LOCKED
    )
    UPDATE ${schema}.${parent} j SET slot = ${target ?? `${schema}.slot_at(clock_timestamp())`}
    FROM picked p WHERE j.slot = ${slot} AND j.id = p.id`;
}

async function carry(pool: pg.Pool, sql: string): Promise<number> {
  return (await pool.query(sql)).rowCount ?? 0;
}

// ---------------------------------------------------------------------------------------------
// ring1: one ring, claim in place. Variants:
//   plain    no carry (a long-running job pins its slot)
//   carry    the leader carries claimed rows out of sealed slots that have no ready row left
//   inplace  carry, and the ack marks the row completed in place (a HOT update); the leader copies a
//            slot's completed rows to history in the transaction that truncates it
//   nohist   carry, and the ack only deletes (no history kept)

type Ring1Variant = 'plain' | 'carry' | 'inplace' | 'nohist';

function ring1(o: RingOptions, variant: Ring1Variant): Layout {
  const s = variant === 'plain' ? 'ring1' : `ring1_${variant}`;
  const hint = (hinted: boolean, alias: string, id: string) =>
    hinted ? `${alias}.slot = ${s}.slot_of(${id}) AND ` : '';
  const ack = (hinted: boolean) => {
    const where = `${hint(hinted, 'j', 'i.id')}j.id = i.id AND j.state = 'claimed' AND j.lease_token = i.token`;
    switch (variant) {
      case 'inplace':
        return `
      WITH ${ACK_INPUT}
      UPDATE ${s}.jobs j SET state = 'completed', finished_at = now(), ack_token = j.lease_token
      FROM input i
      WHERE ${where}
      RETURNING j.id`;
      case 'nohist':
        return `
      WITH ${ACK_INPUT}
      DELETE FROM ${s}.jobs j USING input i
      WHERE ${where}
      RETURNING j.id`;
      default:
        return `
      WITH ${ACK_INPUT}, done AS (
        DELETE FROM ${s}.jobs j USING input i
        WHERE ${where}
        RETURNING j.*
      )
      INSERT INTO ${s}.job_history AS h (${HISTORY_COLUMNS})
      SELECT ${COMPLETED_VALUES} FROM done
      RETURNING h.id`;
    }
  };
  const renew = (
    hinted: boolean,
  ) => `UPDATE ${s}.jobs j SET lease_expires_at = clock_timestamp() + interval '60 seconds'
      WHERE ${hint(hinted, 'j', '$1::bigint')}j.id = $1 AND j.state = 'claimed' AND j.lease_token = $2::uuid
      RETURNING j.id`;
  const withCarry = variant !== 'plain';
  return {
    name: variant === 'plain' ? 'ring1' : (`ring1-${variant}` as LayoutName),
    schema: s,
    ddl: template('ring1.sql', { SCHEMA: s, SLOTS: o.slots, SLOT_IDS: o.slotIds }),
    enqueue: `INSERT INTO ${s}.jobs (slot, id, queue, state, priority, run_at, max_attempts, payload)
      SELECT ${s}.slot_of(n.id), n.id, $1, 'ready', 0, now(), 5, jsonb_build_object('i', n.g)
      FROM (SELECT nextval('${s}.job_id_seq') AS id, g FROM generate_series(1, $2::int) g) n`,
    claim: (n) => `
      WITH picked AS (
        SELECT j.slot, j.id FROM ${s}.jobs j
        WHERE j.queue = $1 AND j.claimed_at IS NULL
        ORDER BY j.priority DESC, j.run_at, j.id
        LIMIT ${n}
        FOR UPDATE SKIP LOCKED
      )
      UPDATE ${s}.jobs j SET state = 'claimed', attempts = j.attempts + 1, lease_token = gen_random_uuid(),
        lease_ms = 60000, lease_expires_at = clock_timestamp() + interval '60 seconds',
        claimed_at = clock_timestamp(), worker_id = $2
      FROM picked p WHERE j.id = p.id AND j.slot = p.slot
      RETURNING j.${RETURNED.replaceAll(', ', ', j.')}`,
    ack: ack(true),
    ackAnywhere: ack(false),
    renew: renew(true),
    renewAnywhere: renew(false),
    lookup: `SELECT id, state FROM ${s}.jobs WHERE id = $1
      UNION ALL SELECT id, state FROM ${s}.job_history WHERE id = $1`,
    claimRelations: (c) => relationsLike(c, s, ['jobs\\_%', 'jobs\\_%ready_idx']),
    liveRelations: (c) => relationsLike(c, s, ['jobs\\_%']),
    maintain: async (pool) => {
      const truncations: TruncateOutcome[] = [];
      let carried = 0;
      for (const slot of await sealedIdSlots(pool, s, o.slotIds, o.slots)) {
        const rel = `${s}.jobs_${slot}`;
        if (withCarry) {
          const ready = await pool.query(`SELECT 1 FROM ${rel} WHERE claimed_at IS NULL LIMIT 1`);
          if (ready.rows.length === 0)
            carried += await carry(pool, carrySql(s, 'jobs', slot, `${s}.current_slot()`));
        }
        const r = await truncateSlot(
          pool,
          rel,
          variant === 'inplace'
            ? `SELECT 1 FROM ${rel} WHERE state <> 'completed' LIMIT 1`
            : `SELECT 1 FROM ${rel} LIMIT 1`,
          o.lockTimeoutMs,
          variant === 'inplace'
            ? `INSERT INTO ${s}.job_history (${HISTORY_COLUMNS})
               SELECT id, queue, state, priority, run_at, attempts, max_attempts, worker_id, idempotency_key,
                      created_at, claimed_at, finished_at, last_error, errors, result, payload, ack_token
               FROM ${rel}`
            : undefined,
        );
        if (r) truncations.push(r);
      }
      return { truncations, vacuums: 0, carried };
    },
    scanRelation: 'jobs_',
    live:
      variant === 'inplace'
        ? `SELECT count(*)::int AS n FROM ${s}.jobs WHERE state <> 'completed'`
        : `SELECT count(*)::int AS n FROM ${s}.jobs`,
    history: variant === 'nohist' ? `SELECT -1 AS n` : `SELECT count(*)::int AS n FROM ${s}.job_history`,
    reset: `TRUNCATE ${s}.jobs, ${s}.job_history`,
    ...(variant === 'inplace'
      ? {
          flush: async (pool: pg.Pool) => {
            for (let slot = 0; slot < o.slots; slot++) {
              const rel = `${s}.jobs_${slot}`;
              await truncateSlot(
                pool,
                rel,
                `SELECT 1 FROM ${rel} WHERE state <> 'completed' LIMIT 1`,
                10_000,
                `INSERT INTO ${s}.job_history (${HISTORY_COLUMNS})
                 SELECT id, queue, state, priority, run_at, attempts, max_attempts, worker_id, idempotency_key,
                        created_at, claimed_at, finished_at, last_error, errors, result, payload, ack_token
                 FROM ${rel}`,
              );
            }
          },
        }
      : {}),
  };
}

// ---------------------------------------------------------------------------------------------
// ring: a ready ring and a claimed ring. `inPlace`: ack marks the row completed in the claimed ring.

function ring(o: RingOptions, inPlace: boolean): Layout {
  const s = inPlace ? 'ring_inplace' : 'ring';
  const ack = (hinted: boolean) => {
    const where = `${hinted ? `c.slot = ${s}.token_slot(i.token) AND ` : ''}c.id = i.id AND c.state = 'claimed'
        AND c.lease_token = i.token`;
    return inPlace
      ? `
      WITH ${ACK_INPUT}
      UPDATE ${s}.claimed c SET state = 'completed', finished_at = now(), ack_token = c.lease_token
      FROM input i
      WHERE ${where}
      RETURNING c.id`
      : `
      WITH ${ACK_INPUT}, done AS (
        DELETE FROM ${s}.claimed c USING input i
        WHERE ${where}
        RETURNING c.*
      )
      INSERT INTO ${s}.job_history AS h (${HISTORY_COLUMNS})
      SELECT ${COMPLETED_VALUES} FROM done
      RETURNING h.id`;
  };
  const renew = (
    hinted: boolean,
  ) => `UPDATE ${s}.claimed SET lease_expires_at = clock_timestamp() + interval '60 seconds'
      WHERE ${hinted ? `slot = ${s}.token_slot($2::uuid) AND ` : ''}id = $1 AND state = 'claimed' AND lease_token = $2::uuid
      RETURNING id`;
  return {
    name: inPlace ? 'ring-inplace' : 'ring',
    schema: s,
    ddl: template('ring.sql', { SCHEMA: s, SLOTS: o.slots, PERIOD_MS: o.periodMs }),
    enqueue: `INSERT INTO ${s}.ready (slot, id, queue, priority, run_at, max_attempts, payload)
      SELECT ${s}.slot_at(clock_timestamp()), nextval('${s}.job_id_seq'), $1, 0, now(), 5, jsonb_build_object('i', g)
      FROM generate_series(1, $2::int) g`,
    claim: (n) => `
      WITH picked AS (
        SELECT r.slot, r.ctid AS tid FROM ${s}.ready r
        WHERE r.queue = $1
        ORDER BY r.priority DESC, r.run_at, r.id
        LIMIT ${n}
        FOR UPDATE SKIP LOCKED
      ), moved AS (
        DELETE FROM ${s}.ready r USING picked p WHERE r.slot = p.slot AND r.ctid = p.tid
        RETURNING r.*
      ), lease AS (
        SELECT ${s}.slot_at(clock_timestamp()) AS slot
      )
      INSERT INTO ${s}.claimed (slot, id, queue, priority, run_at, attempts, max_attempts, lease_token, lease_ms,
                                lease_expires_at, claimed_at, worker_id, idempotency_key, created_at, last_error,
                                errors, payload)
      SELECT l.slot, m.id, m.queue, m.priority, m.run_at, m.attempts + 1, m.max_attempts, ${s}.token_in(l.slot), 60000,
             clock_timestamp() + interval '60 seconds', clock_timestamp(), $2, m.idempotency_key, m.created_at,
             m.last_error, m.errors, m.payload
      FROM moved m CROSS JOIN lease l
      RETURNING ${RETURNED}`,
    ack: ack(true),
    ackAnywhere: ack(false),
    renew: renew(true),
    renewAnywhere: renew(false),
    lookup: `SELECT id, 'ready' AS state FROM ${s}.ready WHERE id = $1
      UNION ALL SELECT id, state FROM ${s}.claimed WHERE id = $1
      UNION ALL SELECT id, state FROM ${s}.job_history WHERE id = $1`,
    claimRelations: (c) => relationsLike(c, s, ['ready\\_%']),
    liveRelations: (c) => relationsLike(c, s, ['ready\\_%', 'claimed\\_%']),
    maintain: async (pool) => {
      const truncations: TruncateOutcome[] = [];
      let carried = 0;
      for (const slot of await sealedSlots(pool, s, o.periodMs, o.slots)) {
        const r = await truncateSlot(
          pool,
          `${s}.ready_${slot}`,
          `SELECT 1 FROM ${s}.ready_${slot} LIMIT 1`,
          o.lockTimeoutMs,
        );
        if (r) truncations.push(r);
        carried += await carry(pool, carrySql(s, 'claimed', slot));
        const c = await truncateSlot(
          pool,
          `${s}.claimed_${slot}`,
          `SELECT 1 FROM ${s}.claimed_${slot} WHERE state = 'claimed' LIMIT 1`,
          o.lockTimeoutMs,
          inPlace
            ? `INSERT INTO ${s}.job_history (${HISTORY_COLUMNS})
               SELECT id, queue, state, priority, run_at, attempts, max_attempts, worker_id, idempotency_key,
                      created_at, claimed_at, finished_at, last_error, errors, result, payload, ack_token
               FROM ${s}.claimed_${slot} WHERE state = 'completed'`
            : undefined,
        );
        if (c) truncations.push(c);
      }
      return { truncations, vacuums: 0, carried };
    },
    scanRelation: 'ready_',
    live: inPlace
      ? `SELECT (SELECT count(*) FROM ${s}.ready) + (SELECT count(*) FROM ${s}.claimed WHERE state = 'claimed') AS n`
      : `SELECT (SELECT count(*) FROM ${s}.ready) + (SELECT count(*) FROM ${s}.claimed) AS n`,
    history: `SELECT count(*)::int AS n FROM ${s}.job_history`,
    reset: `TRUNCATE ${s}.ready, ${s}.claimed, ${s}.job_history`,
    ...(inPlace
      ? {
          flush: async (pool: pg.Pool) => {
            for (let slot = 0; slot < o.slots; slot++) {
              await truncateSlot(
                pool,
                `${s}.claimed_${slot}`,
                `SELECT 1 FROM ${s}.claimed_${slot} WHERE state = 'claimed' LIMIT 1`,
                10_000,
                `INSERT INTO ${s}.job_history (${HISTORY_COLUMNS})
                 SELECT id, queue, state, priority, run_at, attempts, max_attempts, worker_id, idempotency_key,
                        created_at, claimed_at, finished_at, last_error, errors, result, payload, ack_token
                 FROM ${s}.claimed_${slot} WHERE state = 'completed'`,
              );
            }
          },
        }
      : {}),
  };
}

export function layout(name: LayoutName, o: RingOptions): Layout {
  switch (name) {
    case 'single':
      return single(true);
    case 'single-nohist':
      return single(false);
    case 'ring1':
      return ring1(o, 'plain');
    case 'ring1-carry':
      return ring1(o, 'carry');
    case 'ring1-inplace':
      return ring1(o, 'inplace');
    case 'ring1-nohist':
      return ring1(o, 'nohist');
    case 'ring':
      return ring(o, false);
    case 'ring-inplace':
      return ring(o, true);
  }
}
