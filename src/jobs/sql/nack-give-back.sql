-- A nack, 2: the job given back (give_back): ready in place, the attempt uncounted, no error.
-- The statement as the server sends it, recorded with the sample values below by
-- test/jobs/sql-files.test.ts; `npm run sql` rewrites this file (nack-give-back.sql).
-- $1 = '3f0e9a52-6a43-4a0c-9d4e-52d1b6e0c001'
-- $2 = '4097'
-- $3 = 1

      UPDATE baton.jobs j SET state = 'ready', attempts = j.attempts - 1, lease_token = NULL, lease_ms = NULL, lease_expires_at = NULL, deadline_at = NULL, claimed_at = NULL,
             worker_id = NULL, nacked_token = $1::uuid
      WHERE id = $2 AND slot = $3
      RETURNING 
  j.id, j.queue, j.group_key, j.state, j.priority, j.run_at, j.attempts, j.max_attempts, j.idempotency_key,
  j.created_at, j.claimed_at, j.lease_expires_at, j.worker_id, NULL::timestamptz AS finished_at,
  NULL::jsonb AS result, j.last_error, j.errors, NULL::text AS dead_reason, j.payload, j.meta,
  j.timeout_ms, j.deadline_at, j.expires_at, j.unique_key, j.progress;
