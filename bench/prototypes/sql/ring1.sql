-- PROTOTYPE (issue 15): ONE ring of LIST partitions holding ready and claimed jobs, claim updating
-- the row in place (the smallest change from today's table). Not a migration; nothing in src/ reads
-- this. The runner substitutes {{SCHEMA}}, {{SLOTS}} and {{PERIOD_MS}} as in ring.sql.
--
-- A slot can be truncated only once it holds no ready and no claimed row, so one long-running job
-- keeps its whole slot (and every dead ready-index entry in it) alive, and claims, which read the
-- ready index of every partition, keep walking them. Measured against ring.sql to show why the
-- recommended layout moves claimed jobs out of the ready ring.

CREATE SCHEMA {{SCHEMA}};
CREATE SEQUENCE {{SCHEMA}}.job_id_seq;

CREATE FUNCTION {{SCHEMA}}.slot_at(t timestamptz) RETURNS smallint
  LANGUAGE sql IMMUTABLE PARALLEL SAFE
  AS $$ SELECT ((floor(extract(epoch FROM t) * 1000 / {{PERIOD_MS}}))::bigint % {{SLOTS}})::smallint $$;

-- The row's slot in the first byte of its lease token (as in ring.sql), so ack and renew prune to it.
CREATE FUNCTION {{SCHEMA}}.token_slot(token uuid) RETURNS smallint
  LANGUAGE sql IMMUTABLE PARALLEL SAFE
  AS $$ SELECT ('x' || substr(token::text, 1, 2))::bit(8)::integer::smallint $$;
CREATE FUNCTION {{SCHEMA}}.token_in(slot smallint) RETURNS uuid
  LANGUAGE sql VOLATILE PARALLEL SAFE
  AS $$ SELECT (lpad(to_hex(slot::integer), 2, '0') || substr(gen_random_uuid()::text, 3))::uuid $$;

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
  CONSTRAINT jobs_state CHECK (state IN ('ready', 'claimed')),
  PRIMARY KEY (id, slot)
) PARTITION BY LIST (slot);
CREATE INDEX jobs_ready_idx ON {{SCHEMA}}.jobs (queue, priority DESC, run_at, id) WHERE state = 'ready';
CREATE INDEX jobs_claimed_idx ON {{SCHEMA}}.jobs (queue, id) WHERE state = 'claimed';

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
