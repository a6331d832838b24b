-- An enqueue (one job or a batch): jobs due now into the ring, later ones into baton.scheduled_jobs.
-- The statement as the server sends it, recorded with the sample values below by
-- test/jobs/sql-files.test.ts; `npm run sql` rewrites this file (enqueue-plain.sql).
-- $1 = 'q'
-- $2 = 'q'
-- $3 = true
-- $4 = '[{"payload":{"n":1}},{"payload":{"n":2},"priority":5,"delay_ms":60000,"group_key":"g"}]'
-- $5 = 5
-- $6 = 5

    WITH q AS (
      SELECT name, max_attempts FROM baton.queues WHERE name = $1 FOR KEY SHARE
    ), mark_grouped AS (
      -- The first job with a group flips the queue into flow mode, once (claims then serve groups in
      -- turn). The row is locked only while the flag is still off (the filter runs before the lock),
      -- and SKIP LOCKED: a concurrent producer flipping it is enough; nobody waits for that row.
      UPDATE baton.queues SET grouped = true
      WHERE name = (SELECT name FROM baton.queues
                    WHERE name = $2 AND NOT grouped AND $3::boolean FOR NO KEY UPDATE SKIP LOCKED)
    ), input AS MATERIALIZED (
      SELECT m.ord,
             coalesce(m.id, nextval('baton.jobs_id_seq')) AS id,
             coalesce(m.run_at, now() + coalesce(m.delay_ms, 0) * interval '1 millisecond') AS run_at,
             coalesce(m.expires_at, now() + m.expires_in_ms * interval '1 millisecond') AS expires_at,
             coalesce(m.payload, 'null'::jsonb) AS payload, coalesce(m.priority, 0) AS priority,
             coalesce(m.group_key, '') AS group_key, m.max_attempts, m.idempotency_key, m.meta, m.timeout_ms,
             m.unique_key
      FROM ROWS FROM (jsonb_to_recordset($4::jsonb) AS (
             payload jsonb, id bigint, priority integer, delay_ms bigint, run_at timestamptz, max_attempts integer,
             idempotency_key text, group_key text, meta jsonb, timeout_ms integer, expires_at timestamptz,
             expires_in_ms bigint, unique_key text)
           ) WITH ORDINALITY AS m(payload, id, priority, delay_ms, run_at, max_attempts, idempotency_key, group_key,
                                 meta, timeout_ms, expires_at, expires_in_ms, unique_key, ord)
      -- No queue row: draw no ids (the caller creates the queue and runs this again).
      WHERE EXISTS (SELECT 1 FROM q)
    ), due AS (
      INSERT INTO baton.jobs (slot, id, queue, group_key, state, priority, run_at, max_attempts, idempotency_key,
                              payload, meta, timeout_ms, expires_at, unique_key)
      SELECT baton.job_slot(i.id), i.id, q.name, i.group_key, 'ready', i.priority, i.run_at,
             coalesce(i.max_attempts, q.max_attempts, $5::integer),
             i.idempotency_key, i.payload, i.meta, i.timeout_ms, i.expires_at, i.unique_key
      FROM input i CROSS JOIN q WHERE i.run_at <= now()
      RETURNING id, queue, group_key, state, priority, run_at, attempts, max_attempts,
  idempotency_key, created_at, timeout_ms, expires_at, unique_key
    ), later AS (
      INSERT INTO baton.scheduled_jobs (id, queue, group_key, priority, run_at, max_attempts, idempotency_key, payload,
                                        meta, timeout_ms, expires_at, unique_key)
      SELECT i.id, q.name, i.group_key, i.priority, i.run_at,
             coalesce(i.max_attempts, q.max_attempts, $6::integer),
             i.idempotency_key, i.payload, i.meta, i.timeout_ms, i.expires_at, i.unique_key
      FROM input i CROSS JOIN q WHERE i.run_at > now()
      RETURNING id, queue, group_key, 'scheduled'::text AS state, priority, run_at, attempts, max_attempts,
                idempotency_key, created_at, timeout_ms, expires_at, unique_key
    )
    SELECT * FROM due UNION ALL SELECT * FROM later ORDER BY id;
