-- A batch ack (POST /v1/jobs/ack), in its ids' one slot.
-- The statement as the server sends it, recorded with the sample values below by
-- test/jobs/sql-files.test.ts; `npm run sql` rewrites this file (ack-batch-own-slot.sql).
-- $1 = ["4097","4100"]
-- $2 = ["3f0e9a52-6a43-4a0c-9d4e-52d1b6e0c001","3f0e9a52-6a43-4a0c-9d4e-52d1b6e0c002"]
-- $3 = ["4097","4100"]
-- $4 = [null,null]
-- $5 = ["4097","4100"]
-- $6 = [null,null]
-- $7 = ["4097","4100"]

    WITH done AS (
      DELETE FROM baton.jobs j
      WHERE j.id = ANY($1::bigint[]) AND "j".slot = 1 AND "j".lease_token = ($2::uuid[])[array_position($3::bigint[], j.id)]
        AND "j".queue = coalesce(($4::text[])[array_position($5::bigint[], j.id)], "j".queue)
      RETURNING j.*, nullif((($6::text[])[array_position($7::bigint[], j.id)])::jsonb, 'null'::jsonb) AS result
    )
    INSERT INTO baton.job_history AS h (id, queue, group_key, state, priority, run_at, attempts, max_attempts, worker_id, idempotency_key,
      dead_reason, created_at, claimed_at, finished_at, last_error, errors, result, payload, ack_token, meta,
      timeout_ms, expires_at, unique_key, progress, nacked_token, dependents)
    SELECT id, queue, group_key, 'completed', priority, run_at, attempts, max_attempts, worker_id, idempotency_key,
      NULL, created_at, claimed_at, now(), last_error,
      errors, result, payload, lease_token, meta,
      timeout_ms, expires_at, unique_key, progress, nacked_token, dependents FROM done
    RETURNING h.id, h.queue, h.claimed_at, h.finished_at, h.ack_token;
