-- Single acks with `next` in which some ack carries its final progress, in one statement.
-- The statement as the server sends it, recorded with the sample values below by
-- test/jobs/sql-files.test.ts; `npm run sql` rewrites this file (ack-and-claim-progress.sql).
-- $1 = ["4097","4100"]
-- $2 = ["3f0e9a52-6a43-4a0c-9d4e-52d1b6e0c001","3f0e9a52-6a43-4a0c-9d4e-52d1b6e0c002"]
-- $3 = [null,null]
-- $4 = [1,2]
-- $5 = [null,null]
-- $6 = [null,null]
-- $7 = [null,null]
-- $8 = ["{\"done\":4,\"of\":4}",null]
-- $9 = ["4097","4100"]
-- $10 = 30000

    WITH input AS (
      SELECT i.id, i.token, nullif(i.result::jsonb, 'null'::jsonb) AS result, i.n, i.lease_ms, i.worker_id, i.queue,
             i.ord, i.progress
      FROM unnest($1::bigint[], $2::uuid[], $3::text[], $4::integer[],
                  $5::integer[], $6::text[], $7::text[], $8::text[])
           WITH ORDINALITY AS i(id, token, result, n, lease_ms, worker_id, queue, progress, ord)
    ), done AS (
      -- The ack's DELETE, joined to its few items on id and token in each id's own partition (ack.ts
      -- matches a batch by position instead; here that measured slower: docs/benchmarks.md, "What was
      -- tried and what it gave", row "Single ack-and-claim matched by position").
      DELETE FROM baton.jobs j USING input i
      WHERE j.id = ANY($9::bigint[]) AND "j".slot = baton.job_slot(i.id) AND j.id = i.id AND j.state = 'claimed'
        AND j.lease_token = i.token AND "j".queue = coalesce(i.queue, "j".queue)
      RETURNING j.*, i.result, i.ord AS next_claimant, i.n AS next_n, i.lease_ms AS next_lease_ms,
                i.worker_id AS next_worker_id,
                nullif(coalesce((i.progress)::jsonb, j.progress), 'null'::jsonb) AS acked_progress
    ), finished AS (
      INSERT INTO baton.job_history AS h (id, queue, group_key, state, priority, run_at, attempts, max_attempts, worker_id, idempotency_key,
      dead_reason, created_at, claimed_at, finished_at, last_error, errors, result, payload, ack_token, meta,
      timeout_ms, expires_at, unique_key, progress, nacked_token, dependents)
      SELECT id, queue, group_key, 'completed', priority, run_at, attempts, max_attempts, worker_id, idempotency_key,
      NULL, created_at, claimed_at, now(), last_error,
      errors, result, payload, lease_token, meta,
      timeout_ms, expires_at, unique_key, acked_progress, nacked_token, dependents FROM done
      RETURNING 
  h.id, h.queue, h.group_key, h.state, h.priority, h.run_at, h.attempts, h.max_attempts, h.idempotency_key,
  h.created_at, h.claimed_at, NULL::timestamptz AS lease_expires_at, h.worker_id, h.finished_at,
  h.result, h.last_error, h.errors, h.dead_reason, h.payload, h.meta, h.timeout_ms, NULL::timestamptz AS deadline_at,
  h.expires_at, h.unique_key, h.progress, h.ack_token
    ), wanted AS (
      -- Who claims from which queue: the items whose ack went through, numbered within their queue.
      SELECT d.queue, d.next_claimant AS claimant, d.next_n AS n, d.next_lease_ms AS lease_ms,
             d.next_worker_id AS worker_id, sum(d.next_n) OVER (PARTITION BY d.queue ORDER BY d.next_claimant) AS upto
      FROM done d
    ), settings AS (
      SELECT w.queue, sum(w.n) AS total, coalesce(bool_or("q"."paused"), false) AS paused,
    coalesce(max("q"."lease_ms"), $10::integer) AS lease_ms,
    max("q"."timeout_ms") AS timeout_ms,
    coalesce(bool_or("q"."grouped" OR ("q".concurrency_limit IS NOT NULL OR "q".rate_limit IS NOT NULL
    OR "q".group_concurrency_limit IS NOT NULL OR "q".group_rate_limit IS NOT NULL)), false) AS flow
      FROM wanted w LEFT JOIN baton.queues q ON q.name = w.queue
      GROUP BY w.queue
    ), picked AS (
      SELECT s.queue, p.slot, p.id, p.priority, p.run_at
      FROM settings s CROSS JOIN LATERAL (
    SELECT j.slot, j.id, j.priority, j.run_at FROM baton.jobs j
    WHERE j.queue = s.queue AND j.state = 'ready' AND ("j".expires_at IS NULL OR "j".expires_at > now()) AND NOT s.paused AND NOT s.flow
    ORDER BY "j".priority DESC, "j".run_at ASC, "j".id ASC
    LIMIT s.total
    FOR UPDATE SKIP LOCKED
      ) p
    ), assigned AS (
      SELECT p.id, p.slot, w.claimant, coalesce(w.lease_ms, s.lease_ms) AS lease_ms, w.worker_id, s.timeout_ms,
             clock_timestamp() AS at
      FROM (SELECT *, row_number() OVER (PARTITION BY queue ORDER BY "picked".priority DESC, "picked".run_at ASC, "picked".id ASC) AS rn FROM picked) p
      JOIN wanted w ON w.queue = p.queue AND p.rn > w.upto - w.n AND p.rn <= w.upto
      JOIN settings s ON s.queue = p.queue
    ), claimed AS (
      UPDATE baton.jobs j SET
        state = 'claimed',
        attempts = j.attempts + 1,
        lease_token = gen_random_uuid(),
        lease_ms = a.lease_ms,
        -- The lease never runs past the attempt's deadline (least() ignores a NULL one), so the re-arm
        -- fails the attempt at its deadline.
        lease_expires_at = least(a.at + a.lease_ms * interval '1 millisecond',
                                 a.at + coalesce(j.timeout_ms, a.timeout_ms) * interval '1 millisecond'),
        deadline_at = a.at + coalesce(j.timeout_ms, a.timeout_ms) * interval '1 millisecond',
        claimed_at = a.at,
        worker_id = a.worker_id
      FROM assigned a
      WHERE j.id = ANY(ARRAY(SELECT id FROM assigned)) AND j.id = a.id AND j.slot = a.slot
        AND j.slot BETWEEN (SELECT min(slot) FROM assigned) AND (SELECT max(slot) FROM assigned)
        AND (j.state = 'ready') IS TRUE
      RETURNING a.claimant AS claimant, j.id AS id, j.queue AS queue, j.group_key AS group_key,
                j.payload::text AS payload_json, j.priority AS priority, j.attempts AS attempts,
                j.max_attempts AS max_attempts, j.lease_token AS lease_token,
                j.lease_expires_at AS lease_expires_at, j.deadline_at AS deadline_at,
                j.claimed_at AS claimed_at, j.run_at AS run_at, j.created_at AS created_at, j.meta AS meta
    )
    SELECT f.id AS id, f.queue AS queue, f.group_key AS group_key, f.state AS state, f.priority AS priority,
           f.run_at AS run_at, f.attempts AS attempts, f.max_attempts AS max_attempts,
           f.idempotency_key AS idempotency_key, f.created_at AS created_at, f.claimed_at AS claimed_at,
           f.lease_expires_at AS lease_expires_at, f.worker_id AS worker_id, f.finished_at AS finished_at,
           f.result AS result, f.last_error AS last_error, f.errors AS errors, f.dead_reason AS dead_reason,
           f.payload AS payload, f.meta AS meta, f.timeout_ms AS timeout_ms, f.deadline_at AS deadline_at,
           f.expires_at AS expires_at, f.unique_key AS unique_key, f.progress AS progress,
           f.ack_token AS ack_token, NULL::bigint AS claimant, NULL::text AS payload_json,
           NULL::uuid AS lease_token
    FROM finished f
    UNION ALL
    SELECT c.id AS id, c.queue AS queue, c.group_key AS group_key, 'claimed' AS state, c.priority AS priority,
           c.run_at AS run_at, c.attempts AS attempts, c.max_attempts AS max_attempts,
           NULL::text AS idempotency_key, c.created_at AS created_at, c.claimed_at AS claimed_at,
           c.lease_expires_at AS lease_expires_at, NULL::text AS worker_id, NULL::timestamptz AS finished_at,
           NULL::jsonb AS result, NULL::jsonb AS last_error, NULL::jsonb AS errors, NULL::text AS dead_reason,
           NULL::jsonb AS payload, c.meta AS meta, NULL::integer AS timeout_ms, c.deadline_at AS deadline_at,
           NULL::timestamptz AS expires_at, NULL::text AS unique_key, NULL::jsonb AS progress,
           NULL::uuid AS ack_token, c.claimant AS claimant, c.payload_json AS payload_json,
           c.lease_token AS lease_token
    FROM claimed c;
