-- An enqueue whose items have unique keys: each key's row first, a job only for the keys it got.
-- The statement as the server sends it, recorded with the sample values below by
-- test/jobs/sql-files.test.ts; `npm run sql` rewrites this file (enqueue-gated.sql).
-- $1 = 'q'
-- $2 = 'q'
-- $3 = false
-- $4 = '[{"payload":{"n":1},"unique_key":"k1"},{"payload":{"n":2}}]'
-- $5 = 'q'
-- $6 = 5
-- $7 = 5

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
    ), held AS (
      INSERT INTO baton.unique_keys AS k (queue, key, job_id)
      SELECT $5, i.unique_key, i.id FROM input i
      WHERE i.unique_key IS NOT NULL
      ORDER BY i.unique_key
      ON CONFLICT (queue, key) DO UPDATE SET job_id = excluded.job_id
        -- Take over only a key whose job the snapshot shows no longer waiting; a job it cannot see
        -- (committed after it began) is judged by the locking path. So is a row whose generation
        -- moved since the snapshot: a job came back to waiting and took the key back meanwhile
        -- (unique-return.ts), which the snapshot shows still claimed or dead.
        WHERE k.generation = (SELECT s.generation FROM baton.unique_keys s WHERE s.queue = k.queue AND s.key = k.key)
          AND (EXISTS (SELECT 1 FROM baton.job_history h WHERE h.id = k.job_id)
               OR EXISTS (SELECT 1 FROM baton.jobs j WHERE j.id = k.job_id AND NOT (j.state = 'ready' AND ("j".expires_at IS NULL OR "j".expires_at > now())))
               OR EXISTS (SELECT 1 FROM baton.scheduled_jobs s WHERE s.id = k.job_id AND NOT (("s".expires_at IS NULL OR "s".expires_at > now()))))
      RETURNING job_id
    ), go AS MATERIALIZED (
      SELECT * FROM input i WHERE i.unique_key IS NULL OR i.id IN (SELECT job_id FROM held)
    ), due AS (
      INSERT INTO baton.jobs (slot, id, queue, group_key, state, priority, run_at, max_attempts, idempotency_key,
                              payload, meta, timeout_ms, expires_at, unique_key)
      SELECT baton.job_slot(i.id), i.id, q.name, i.group_key, 'ready', i.priority, i.run_at,
             coalesce(i.max_attempts, q.max_attempts, $6::integer),
             i.idempotency_key, i.payload, i.meta, i.timeout_ms, i.expires_at, i.unique_key
      FROM go i CROSS JOIN q WHERE i.run_at <= now()
      RETURNING id, queue, group_key, state, priority, run_at, attempts, max_attempts,
  idempotency_key, created_at, timeout_ms, expires_at, unique_key
    ), later AS (
      INSERT INTO baton.scheduled_jobs (id, queue, group_key, priority, run_at, max_attempts, idempotency_key, payload,
                                        meta, timeout_ms, expires_at, unique_key)
      SELECT i.id, q.name, i.group_key, i.priority, i.run_at,
             coalesce(i.max_attempts, q.max_attempts, $7::integer),
             i.idempotency_key, i.payload, i.meta, i.timeout_ms, i.expires_at, i.unique_key
      FROM go i CROSS JOIN q WHERE i.run_at > now()
      RETURNING id, queue, group_key, 'scheduled'::text AS state, priority, run_at, attempts, max_attempts,
                idempotency_key, created_at, timeout_ms, expires_at, unique_key
    )
    SELECT x.*, 'inserted' AS how FROM (SELECT * FROM due UNION ALL SELECT * FROM later) x
    UNION ALL
    -- The queue existed: tells "nothing inserted" from "no queue".
    SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 'queue' FROM q
    ORDER BY 1;
