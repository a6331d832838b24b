-- PROTOTYPE (issue 15): live jobs in rings of LIST partitions emptied by TRUNCATE.
-- Not a migration; nothing in src/ reads this. The runner (bench/prototypes/run.ts) substitutes
-- {{SCHEMA}}, {{SLOTS}} (partitions per ring) and {{PERIOD_MS}} (how long a slot is current).
--
-- Two rings:
--   {{SCHEMA}}.ready    ready jobs only. Enqueue inserts into the slot of the current period;
--                       claim DELETEs the picked rows from here and INSERTs them into `claimed`.
--                       Rows are never updated here, so a slot holds no live row once its jobs are
--                       claimed, and the leader TRUNCATEs it: the dead index entries that a held
--                       horizon keeps are gone with it.
--   {{SCHEMA}}.claimed  jobs under a lease (and, in the in-place-ack variant, finished ones until
--                       the leader copies them to history and truncates the slot). Renew updates
--                       the row here (HOT: lease columns are in no index). The lease token carries
--                       the claimed slot in its first byte, so ack/renew/nack find the partition
--                       from the token (run-time pruning) instead of probing every partition.
-- The `ring1` variant (claim updates the row in place in `ready`) is ring1.sql.

CREATE SCHEMA {{SCHEMA}};
CREATE SEQUENCE {{SCHEMA}}.job_id_seq;

-- The slot of a moment: periods of {{PERIOD_MS}} ms since the epoch, modulo {{SLOTS}}.
-- Both rings use it; it needs no table read (no hot-path row that a held horizon could bloat).
CREATE FUNCTION {{SCHEMA}}.slot_at(t timestamptz) RETURNS smallint
  LANGUAGE sql IMMUTABLE PARALLEL SAFE
  AS $$ SELECT ((floor(extract(epoch FROM t) * 1000 / {{PERIOD_MS}}))::bigint % {{SLOTS}})::smallint $$;

-- The slot a lease token was minted in (its first byte).
CREATE FUNCTION {{SCHEMA}}.token_slot(token uuid) RETURNS smallint
  LANGUAGE sql IMMUTABLE PARALLEL SAFE
  AS $$ SELECT ('x' || substr(token::text, 1, 2))::bit(8)::integer::smallint $$;

-- A fresh random lease token whose first byte is `slot`.
CREATE FUNCTION {{SCHEMA}}.token_in(slot smallint) RETURNS uuid
  LANGUAGE sql VOLATILE PARALLEL SAFE
  AS $$ SELECT (lpad(to_hex(slot::integer), 2, '0') || substr(gen_random_uuid()::text, 3))::uuid $$;

CREATE TABLE {{SCHEMA}}.ready (
  slot            smallint NOT NULL,
  id              bigint NOT NULL,
  queue           text NOT NULL,
  priority        integer NOT NULL DEFAULT 0,
  run_at          timestamptz NOT NULL,
  attempts        integer NOT NULL DEFAULT 0,
  max_attempts    integer NOT NULL,
  idempotency_key text,
  created_at      timestamptz NOT NULL DEFAULT now(),
  last_error      jsonb,
  errors          jsonb NOT NULL DEFAULT '[]',
  payload         jsonb NOT NULL
) PARTITION BY LIST (slot);
-- Every row is ready: the claim index needs no predicate. No primary key (it would have to include
-- slot): ids are unique by the sequence, and lookups by id use a plain index. The claim removes
-- the rows it picked by (slot, ctid): no index has slot in it, so each partition's only sensible
-- plan for that is a TID scan (with (id, slot) as a primary key, generic plans made while a partition
-- was empty scanned a whole index per picked row).
CREATE INDEX ready_claim_idx ON {{SCHEMA}}.ready (queue, priority DESC, run_at, id);
CREATE INDEX ready_id_idx ON {{SCHEMA}}.ready (id);

CREATE TABLE {{SCHEMA}}.claimed (
  slot             smallint NOT NULL,
  id               bigint NOT NULL,
  queue            text NOT NULL,
  state            text NOT NULL DEFAULT 'claimed',
  priority         integer NOT NULL,
  run_at           timestamptz NOT NULL,
  attempts         integer NOT NULL,
  max_attempts     integer NOT NULL,
  lease_token      uuid,
  lease_ms         integer,
  lease_expires_at timestamptz,
  claimed_at       timestamptz NOT NULL,
  worker_id        text,
  idempotency_key  text,
  created_at       timestamptz NOT NULL,
  last_error       jsonb,
  errors           jsonb NOT NULL DEFAULT '[]',
  payload          jsonb NOT NULL,
  -- Only for the in-place-ack variant: a finished row waits here until the leader copies it out.
  finished_at      timestamptz,
  result           jsonb,
  ack_token        uuid,
  CONSTRAINT claimed_state CHECK (state IN ('claimed', 'completed')),
  PRIMARY KEY (id, slot)
) PARTITION BY LIST (slot);
-- No other index: ack, renew and nack find a row by (id, slot); re-arm and the leader's "anything
-- still claimed in this slot?" read the few small partitions of the ring. A second index with `id`
-- in it (the (queue, id) index of today's table) gave generic plans a choice, and a plan made while
-- a partition was empty chose it for probes by id: a full index scan per acked job.

DO $$
BEGIN
  FOR s IN 0..{{SLOTS}} - 1 LOOP
    EXECUTE format('CREATE TABLE {{SCHEMA}}.ready_%s PARTITION OF {{SCHEMA}}.ready FOR VALUES IN (%s)', s, s);
    EXECUTE format('CREATE TABLE {{SCHEMA}}.claimed_%s PARTITION OF {{SCHEMA}}.claimed FOR VALUES IN (%s)
                    WITH (fillfactor = 70)', s, s);
  END LOOP;
END $$;

-- History: as today (one table). Time-partitioning it is orthogonal (see docs/design/storage-ring.md).
CREATE TABLE {{SCHEMA}}.job_history (
  id              bigint PRIMARY KEY,
  queue           text NOT NULL,
  state           text NOT NULL,
  priority        integer NOT NULL,
  run_at          timestamptz NOT NULL,
  attempts        integer NOT NULL,
  max_attempts    integer NOT NULL,
  worker_id       text,
  idempotency_key text,
  dead_reason     text,
  created_at      timestamptz NOT NULL,
  claimed_at      timestamptz,
  finished_at     timestamptz NOT NULL DEFAULT now(),
  last_error      jsonb,
  errors          jsonb NOT NULL DEFAULT '[]',
  result          jsonb,
  payload         jsonb NOT NULL,
  ack_token       uuid
);
CREATE INDEX job_history_queue_state_finished_idx ON {{SCHEMA}}.job_history (queue, state, finished_at, id);
