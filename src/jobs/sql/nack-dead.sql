-- A nack, 2: dead, moved to baton.job_history.
-- The statement as the server sends it, recorded with the sample values below by
-- test/jobs/sql-files.test.ts; `npm run sql` rewrites this file (nack-dead.sql).
-- $1 = '4097'
-- $2 = 1
-- $3 = 'nacked_dead'
-- $4 = '{"attempt":1,"at":"2025-01-01T12:00:00.000Z","message":"failed","worker_id":"worker-1"}'
-- $5 = '{"attempt":1,"at":"2025-01-01T12:00:00.000Z","message":"failed","worker_id":"worker-1"}'
-- $6 = '3f0e9a52-6a43-4a0c-9d4e-52d1b6e0c001'

      WITH gone AS (DELETE FROM baton.jobs WHERE id = $1 AND slot = $2 RETURNING *)
      INSERT INTO baton.job_history AS h (id, queue, group_key, state, priority, run_at, attempts, max_attempts, worker_id, idempotency_key,
      dead_reason, created_at, claimed_at, finished_at, last_error, errors, result, payload, ack_token, meta,
      timeout_ms, expires_at, unique_key, progress, nacked_token, dependents)
      SELECT id, queue, group_key, 'dead', priority, run_at, attempts, max_attempts, worker_id, idempotency_key,
      $3, created_at, claimed_at, now(), $4::jsonb,
      (SELECT coalesce(jsonb_agg(e ORDER BY n), '[]'::jsonb)
    FROM (SELECT e, n FROM jsonb_array_elements(errors || jsonb_build_array($5::jsonb)) WITH ORDINALITY AS a(e, n)
          ORDER BY n DESC LIMIT 20) kept), NULL, payload, NULL, meta,
      timeout_ms, expires_at, unique_key, progress, $6::uuid, dependents FROM gone
      RETURNING 
  h.id, h.queue, h.group_key, h.state, h.priority, h.run_at, h.attempts, h.max_attempts, h.idempotency_key,
  h.created_at, h.claimed_at, NULL::timestamptz AS lease_expires_at, h.worker_id, h.finished_at,
  h.result, h.last_error, h.errors, h.dead_reason, h.payload, h.meta, h.timeout_ms, NULL::timestamptz AS deadline_at,
  h.expires_at, h.unique_key, h.progress;
