-- A nack, 2: a retry later, moved to baton.scheduled_jobs.
-- The statement as the server sends it, recorded with the sample values below by
-- test/jobs/sql-files.test.ts; `npm run sql` rewrites this file (nack-later.sql).
-- $1 = '4097'
-- $2 = 1
-- $3 = '3f0e9a52-6a43-4a0c-9d4e-52d1b6e0c001'
-- $4 = 5000
-- $5 = '{"attempt":1,"at":"2025-01-01T12:00:00.000Z","message":"failed","worker_id":"worker-1"}'
-- $6 = '{"attempt":1,"at":"2025-01-01T12:00:00.000Z","message":"failed","worker_id":"worker-1"}'

    WITH gone AS (DELETE FROM baton.jobs WHERE id = $1 AND slot = $2 RETURNING *)
    INSERT INTO baton.scheduled_jobs AS s ("id", "queue", "group_key", "priority", "max_attempts", "idempotency_key", "created_at", "payload", "meta", "timeout_ms", "expires_at", "unique_key", "progress", "nacked_token", "dependents", run_at, attempts, claimed_at, worker_id, last_error,
                                           errors)
    SELECT "id", "queue", "group_key", "priority", "max_attempts", "idempotency_key", "created_at", "payload", "meta", "timeout_ms", "expires_at", "unique_key", "progress", $3::uuid, "dependents", now() + $4::bigint * interval '1 millisecond', attempts, claimed_at, worker_id,
           $5::jsonb, (SELECT coalesce(jsonb_agg(e ORDER BY n), '[]'::jsonb)
    FROM (SELECT e, n FROM jsonb_array_elements(errors || jsonb_build_array($6::jsonb)) WITH ORDINALITY AS a(e, n)
          ORDER BY n DESC LIMIT 20) kept)
    FROM gone
    RETURNING 
  s.id, s.queue, s.group_key, 'scheduled'::text AS state, s.priority, s.run_at, s.attempts, s.max_attempts,
  s.idempotency_key, s.created_at, s.claimed_at, NULL::timestamptz AS lease_expires_at, s.worker_id,
  NULL::timestamptz AS finished_at, NULL::jsonb AS result, s.last_error, s.errors, NULL::text AS dead_reason,
  s.payload, s.meta, s.timeout_ms, NULL::timestamptz AS deadline_at, s.expires_at, s.unique_key, s.progress;
