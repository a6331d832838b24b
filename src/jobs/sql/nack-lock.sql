-- A nack, 1: the claimed row locked by its token, in its id's slot.
-- The statement as the server sends it, recorded with the sample values below by
-- test/jobs/sql-files.test.ts; `npm run sql` rewrites this file (nack-lock.sql).
-- $1 = '4097'
-- $2 = '4097'
-- $3 = '3f0e9a52-6a43-4a0c-9d4e-52d1b6e0c001'
-- $4 = null

    SELECT j.slot, j.queue, j.unique_key, j.attempts, j.max_attempts, j.worker_id, now() AS now,
           q.backoff_base_ms, q.backoff_max_ms, q.backoff_jitter
    FROM baton.jobs j LEFT JOIN baton.queues q ON q.name = j.queue
    WHERE "j".slot = baton.job_slot($1::bigint) AND j.id = $2 AND j.state = 'claimed' AND j.lease_token = $3::uuid
      AND "j".queue = coalesce($4::text, "j".queue)
    FOR UPDATE OF j;
