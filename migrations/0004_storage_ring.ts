import { type Kysely, sql } from 'kysely';

/**
 * Live jobs in a ring of partitions that the leader empties with TRUNCATE (docs/architecture.md,
 * "Storage that a held horizon cannot slow down").
 *
 * A transaction left open anywhere in the database (an idle session, a long report, pg_dump) stops
 * vacuum from removing the dead row versions that every claim and ack leave behind; in one table,
 * every claim then walks all of them. Here ready and claimed jobs live in baton.jobs, LIST-
 * partitioned on `slot`, a function of the job's id: 4,096 consecutive ids per slot, 8 slots. A
 * slot that ids have moved past (sealed) and that holds no ready job gets its long-running claimed
 * jobs carried into the current slot and is then TRUNCATEd, which no open transaction can stop. A
 * claim therefore walks the dead entries of a few slots, however long the horizon is held.
 *
 * Scheduled jobs (a future run_at, or a retry after a backoff) live in their own plain table, so a
 * job due next week does not keep a slot from being emptied; the promoter moves them into the ring.
 *
 * The slot of an id is an IMMUTABLE SQL function, so `slot = baton.job_slot($1)` prunes a statement
 * to one partition. Its constants are part of this migration: a later change of ring size is a new
 * migration that moves the rows.
 *
 * Live jobs are kept: ready and claimed rows move into the ring with their ids, attempts, leases and
 * tokens (a worker holding a lease acks it as usual); scheduled rows move to baton.scheduled_jobs.
 * Baton does not serve while this runs (the live table is small by design); a rolling upgrade across
 * it is not supported.
 */
const SLOTS = 8;

export async function up(db: Kysely<any>): Promise<void> {
  await sql`LOCK TABLE baton.jobs IN ACCESS EXCLUSIVE MODE`.execute(db);

  // Ids keep coming from one sequence, now free-standing (the old identity column's goes with it).
  const { rows } = await sql<{ next: string }>`
    SELECT greatest(
      (SELECT CASE WHEN is_called THEN last_value + 1 ELSE last_value END FROM baton.jobs_id_seq),
      (SELECT coalesce(max(id), 0) + 1 FROM baton.jobs),
      (SELECT coalesce(max(id), 0) + 1 FROM baton.job_history),
      (SELECT coalesce(max(job_id), 0) + 1 FROM baton.idempotency_keys))::text AS next`.execute(db);
  const next = rows[0]!.next;
  await sql`ALTER TABLE baton.jobs RENAME TO jobs_old`.execute(db);
  await sql`ALTER TABLE baton.jobs_old ALTER COLUMN id DROP IDENTITY`.execute(db);
  for (const index of ['jobs_ready_idx', 'jobs_scheduled_idx', 'jobs_claimed_idx', 'jobs_pkey']) {
    await sql`ALTER INDEX IF EXISTS ${sql.id('baton', index)} RENAME TO ${sql.id(`${index}_old`)}`.execute(
      db,
    );
  }
  await sql`CREATE SEQUENCE baton.jobs_id_seq START WITH ${sql.lit(Number(next))}`.execute(db);

  await sql`
    CREATE FUNCTION baton.job_slot(id bigint) RETURNS smallint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT ((id >> 12) % ${sql.lit(SLOTS)})::smallint $$`.execute(db);

  // The ring. The lease stays in the row: renewals touch only claimed rows, which are in no index
  // a claim reads, and HOT-update them in place (fillfactor 70). No index on claimed rows: the
  // leader's re-arm reads the whole ring, which is at most a few slots of rows.
  await sql`
    CREATE TABLE baton.jobs (
      slot             smallint NOT NULL,
      id               bigint NOT NULL,
      queue            text NOT NULL,
      state            text NOT NULL,
      priority         integer NOT NULL DEFAULT 0,
      run_at           timestamptz NOT NULL,
      attempts         integer NOT NULL DEFAULT 0,
      max_attempts     integer NOT NULL,
      lease_token      uuid,
      lease_ms         integer,
      lease_expires_at timestamptz,
      claimed_at       timestamptz,
      worker_id        text,
      idempotency_key  text,
      created_at       timestamptz NOT NULL DEFAULT now(),
      last_error       jsonb,
      errors           jsonb NOT NULL DEFAULT '[]',
      payload          jsonb NOT NULL,
      CONSTRAINT jobs_state CHECK (state IN ('ready', 'claimed')),
      CONSTRAINT jobs_lease CHECK (
        (state = 'claimed') = (lease_token IS NOT NULL AND lease_expires_at IS NOT NULL)
      ),
      CONSTRAINT jobs_attempts CHECK (attempts >= 0 AND max_attempts >= 1),
      -- A job starts in baton.job_slot(id); the leader may carry a long-running one to a later slot.
      PRIMARY KEY (id, slot)
    ) PARTITION BY LIST (slot)`.execute(db);
  for (let slot = 0; slot < SLOTS; slot++) {
    await sql`
      CREATE TABLE ${sql.id('baton', `jobs_${slot}`)} PARTITION OF baton.jobs FOR VALUES IN (${sql.lit(slot)})
      WITH (fillfactor = 70, autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 1000,
            autovacuum_vacuum_cost_delay = 0)`.execute(db);
  }
  // The claim index: only ready rows, in claim order. The only index besides the primary key, so
  // that a probe by id can only ever use the primary key (see src/db/database.ts, planner guard).
  await sql`
    CREATE INDEX jobs_ready_idx ON baton.jobs (queue, priority DESC, run_at, id)
    WHERE state = 'ready'`.execute(db);

  await sql`
    CREATE TABLE baton.scheduled_jobs (
      id              bigint PRIMARY KEY,
      queue           text NOT NULL,
      priority        integer NOT NULL DEFAULT 0,
      run_at          timestamptz NOT NULL,
      attempts        integer NOT NULL DEFAULT 0,
      max_attempts    integer NOT NULL,
      claimed_at      timestamptz,
      worker_id       text,
      idempotency_key text,
      created_at      timestamptz NOT NULL DEFAULT now(),
      last_error      jsonb,
      errors          jsonb NOT NULL DEFAULT '[]',
      payload         jsonb NOT NULL,
      CONSTRAINT scheduled_jobs_attempts CHECK (attempts >= 0 AND max_attempts >= 1)
    ) WITH (fillfactor = 90)`.execute(db);
  // The promoter walks due jobs in run_at order, one queue at a time.
  await sql`CREATE INDEX scheduled_jobs_due_idx ON baton.scheduled_jobs (queue, run_at)`.execute(db);

  await sql`
    INSERT INTO baton.jobs (slot, id, queue, state, priority, run_at, attempts, max_attempts, lease_token,
                            lease_ms, lease_expires_at, claimed_at, worker_id, idempotency_key, created_at,
                            last_error, errors, payload)
    SELECT baton.job_slot(id), id, queue, state, priority, run_at, attempts, max_attempts, lease_token,
           lease_ms, lease_expires_at, claimed_at, worker_id, idempotency_key, created_at,
           last_error, errors, payload
    FROM baton.jobs_old WHERE state IN ('ready', 'claimed')`.execute(db);
  await sql`
    INSERT INTO baton.scheduled_jobs (id, queue, priority, run_at, attempts, max_attempts, claimed_at, worker_id,
                                      idempotency_key, created_at, last_error, errors, payload)
    SELECT id, queue, priority, run_at, attempts, max_attempts, claimed_at, worker_id,
           idempotency_key, created_at, last_error, errors, payload
    FROM baton.jobs_old WHERE state = 'scheduled'`.execute(db);
  await sql`DROP TABLE baton.jobs_old`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`LOCK TABLE baton.jobs, baton.scheduled_jobs IN ACCESS EXCLUSIVE MODE`.execute(db);
  await sql`ALTER TABLE baton.jobs RENAME TO jobs_ring`.execute(db);
  await sql`ALTER INDEX baton.jobs_ready_idx RENAME TO jobs_ready_idx_ring`.execute(db);
  await sql`ALTER TABLE baton.jobs_ring RENAME CONSTRAINT jobs_state TO jobs_ring_state`.execute(db);
  await sql`ALTER TABLE baton.jobs_ring RENAME CONSTRAINT jobs_lease TO jobs_ring_lease`.execute(db);
  await sql`ALTER TABLE baton.jobs_ring RENAME CONSTRAINT jobs_attempts TO jobs_ring_attempts`.execute(db);
  await sql`
    CREATE TABLE baton.jobs (
      id bigint PRIMARY KEY, queue text NOT NULL, state text NOT NULL, priority integer NOT NULL DEFAULT 0,
      run_at timestamptz NOT NULL, attempts integer NOT NULL DEFAULT 0, max_attempts integer NOT NULL,
      lease_token uuid, lease_ms integer, lease_expires_at timestamptz, claimed_at timestamptz,
      worker_id text, idempotency_key text, created_at timestamptz NOT NULL DEFAULT now(),
      last_error jsonb, errors jsonb NOT NULL DEFAULT '[]', payload jsonb NOT NULL,
      CONSTRAINT jobs_state CHECK (state IN ('scheduled', 'ready', 'claimed')),
      CONSTRAINT jobs_lease CHECK ((state = 'claimed') = (lease_token IS NOT NULL AND lease_expires_at IS NOT NULL)),
      CONSTRAINT jobs_attempts CHECK (attempts >= 0 AND max_attempts >= 1)
    ) WITH (fillfactor = 70)`.execute(db);
  await sql`
    INSERT INTO baton.jobs SELECT id, queue, state, priority, run_at, attempts, max_attempts, lease_token, lease_ms,
      lease_expires_at, claimed_at, worker_id, idempotency_key, created_at, last_error, errors, payload
    FROM baton.jobs_ring`.execute(db);
  await sql`
    INSERT INTO baton.jobs (id, queue, state, priority, run_at, attempts, max_attempts, claimed_at, worker_id,
                            idempotency_key, created_at, last_error, errors, payload)
    SELECT id, queue, 'scheduled', priority, run_at, attempts, max_attempts, claimed_at, worker_id,
           idempotency_key, created_at, last_error, errors, payload
    FROM baton.scheduled_jobs`.execute(db);
  await sql`DROP TABLE baton.jobs_ring, baton.scheduled_jobs`.execute(db);
  await sql`DROP FUNCTION baton.job_slot(bigint)`.execute(db);
  // The old table drew ids from the sequence by default; it goes on above every id in use.
  await sql`
    SELECT setval('baton.jobs_id_seq', greatest(
      (SELECT last_value FROM baton.jobs_id_seq),
      (SELECT coalesce(max(id), 1) FROM baton.jobs),
      (SELECT coalesce(max(id), 1) FROM baton.job_history)))`.execute(db);
  await sql`ALTER TABLE baton.jobs ALTER COLUMN id SET DEFAULT nextval('baton.jobs_id_seq')`.execute(db);
  await sql`ALTER SEQUENCE baton.jobs_id_seq OWNED BY baton.jobs.id`.execute(db);
  await sql`CREATE INDEX jobs_ready_idx ON baton.jobs (queue, priority DESC, run_at, id) WHERE state = 'ready'`.execute(
    db,
  );
  await sql`CREATE INDEX jobs_scheduled_idx ON baton.jobs (queue, run_at) WHERE state = 'scheduled'`.execute(
    db,
  );
  await sql`CREATE INDEX jobs_claimed_idx ON baton.jobs (queue, id) WHERE state = 'claimed'`.execute(db);
}
