-- A nack, 2: claimable again at once (retry_in_ms 0), in place.
-- The statement as the server sends it, recorded with the sample values below by
-- test/jobs/sql-files.test.ts; `npm run sql` rewrites this file (nack-retry.sql).
-- $1 = '{"attempt":1,"at":"2025-01-01T12:00:00.000Z","message":"failed","worker_id":"worker-1"}'
-- $2 = '{"attempt":1,"at":"2025-01-01T12:00:00.000Z","message":"failed","worker_id":"worker-1"}'
-- $3 = '3f0e9a52-6a43-4a0c-9d4e-52d1b6e0c001'
-- $4 = '4097'
-- $5 = 1

      UPDATE baton.jobs j SET state = 'ready', run_at = now(), lease_token = NULL, lease_ms = NULL, lease_expires_at = NULL, deadline_at = NULL,
             last_error = $1::jsonb, errors = (SELECT coalesce(jsonb_agg(e ORDER BY n), '[]'::jsonb)
    FROM (SELECT e, n FROM jsonb_array_elements(j.errors || jsonb_build_array($2::jsonb)) WITH ORDINALITY AS a(e, n)
          ORDER BY n DESC LIMIT 20) kept), nacked_token = $3::uuid
      WHERE id = $4 AND slot = $5
      RETURNING 
  j.id, j.queue, j.group_key, j.state, j.priority, j.run_at, j.attempts, j.max_attempts, j.idempotency_key,
  j.created_at, j.claimed_at, j.lease_expires_at, j.worker_id, NULL::timestamptz AS finished_at,
  NULL::jsonb AS result, j.last_error, j.errors, NULL::text AS dead_reason, j.payload, j.meta,
  j.timeout_ms, j.deadline_at, j.expires_at, j.unique_key, j.progress;
