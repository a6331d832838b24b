-- PROTOTYPE (issue 15): ONE ring of LIST partitions holding ready and claimed jobs (and, in the
-- in-place-ack variant, completed ones until their slot is truncated), claim updating the row in
-- place (the smallest change from today's table). Not a migration; nothing in src/ reads this. The
-- runner substitutes {{SCHEMA}}, {{SLOTS}} and {{SLOT_IDS}} (consecutive ids per slot).
--
-- A slot can be truncated only once it holds no ready and no claimed row, so one long-running job
-- keeps its whole slot (and every dead ready-index entry in it) alive unless the leader carries it
-- forward (layout ring1-carry).
--
-- The claim index's predicate is `claimed_at IS NULL` rather than `state = 'ready'`: a claim sets
-- claimed_at (the row must leave the index: not HOT), but an in-place ack changes only state,
-- finished_at and ack_token, none of them in an index or a predicate, so it can be a HOT update.

CREATE SCHEMA {{SCHEMA}};
CREATE SEQUENCE {{SCHEMA}}.job_id_seq;

-- A job's slot is a function of its id: ids come from one sequence, {{SLOT_IDS}} consecutive ids
-- share a slot, and the ring wraps after {{SLOTS}} slots. So a slot holds at most {{SLOT_IDS}} jobs
-- whatever the enqueue rate (the walk a held horizon can build up in it is bounded by that), the
-- current slot is read from the sequence (no table, nothing for a held horizon to bloat), and ack,
-- renew and GET by id go straight to the slot of the id. Only a row the leader carried forward is
-- elsewhere; callers then look in every slot.
CREATE FUNCTION {{SCHEMA}}.slot_of(id bigint) RETURNS smallint
  LANGUAGE sql IMMUTABLE PARALLEL SAFE
  AS $$ SELECT ((id / {{SLOT_IDS}}) % {{SLOTS}})::smallint $$;

-- The slot ids are being drawn from now (carried rows go there).
CREATE FUNCTION {{SCHEMA}}.current_slot() RETURNS smallint
  LANGUAGE sql VOLATILE
  AS $$ SELECT {{SCHEMA}}.slot_of(last_value) FROM {{SCHEMA}}.job_id_seq $$;

CREATE TABLE {{SCHEMA}}.jobs (
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
  finished_at      timestamptz,
  result           jsonb,
  ack_token        uuid,
  CONSTRAINT jobs_state CHECK (state IN ('ready', 'claimed', 'completed')),
  CONSTRAINT jobs_ready CHECK ((state = 'ready') = (claimed_at IS NULL)),
  PRIMARY KEY (id, slot)
) PARTITION BY LIST (slot);
CREATE INDEX jobs_ready_idx ON {{SCHEMA}}.jobs (queue, priority DESC, run_at, id) WHERE claimed_at IS NULL;
-- No claimed index (see ring.sql): probes by id must have one index to choose.

DO $$
BEGIN
  FOR s IN 0..{{SLOTS}} - 1 LOOP
    EXECUTE format('CREATE TABLE {{SCHEMA}}.jobs_%s PARTITION OF {{SCHEMA}}.jobs FOR VALUES IN (%s)
                    WITH (fillfactor = 70)', s, s);
  END LOOP;
END $$;

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
