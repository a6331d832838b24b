-- The claim of a limited queue whose ready jobs have no group: its budget from baton.flow_budget.
-- The statement as the server sends it, recorded with the sample values below by
-- test/jobs/sql-files.test.ts; `npm run sql` rewrites this file (claim-limited.sql).
-- $1 = 30000
-- $2 = 'q-limited'
-- $3 = 'q-limited'
-- $4 = 'q-limited'
-- $5 = '[{"n":10,"lease_ms":60000,"worker_id":"worker-1"},{"n":5,"worker_id":"worker-2"}]'
-- $6 = 'q-limited'

    WITH RECURSIVE settings AS (
      SELECT coalesce(bool_or("queues"."paused"), false) AS paused,
    coalesce(max("queues"."lease_ms"), $1::integer) AS lease_ms,
    max("queues"."timeout_ms") AS timeout_ms,
    coalesce(bool_or("queues"."grouped" OR ("queues".concurrency_limit IS NOT NULL OR "queues".rate_limit IS NOT NULL
    OR "queues".group_concurrency_limit IS NOT NULL OR "queues".group_rate_limit IS NOT NULL)), false) AS flow, coalesce(bool_or(("queues".concurrency_limit IS NOT NULL OR "queues".rate_limit IS NOT NULL
    OR "queues".group_concurrency_limit IS NOT NULL OR "queues".group_rate_limit IS NOT NULL)), false) AS limited
      FROM baton.queues WHERE name = $2
    ), budget AS (SELECT * FROM baton.flow_budget($3, 15)), picked AS (
      
    SELECT j.slot, j.id, j.priority, j.run_at FROM baton.jobs j
    WHERE j.queue = (SELECT $4::text) AND j.state = 'ready' AND ("j".expires_at IS NULL OR "j".expires_at > now()) AND (j.group_key = '' OR NOT (SELECT blank_only FROM budget))
    ORDER BY "j".priority DESC, "j".run_at ASC, "j".id ASC
    LIMIT (SELECT CASE WHEN walk THEN 0 ELSE n END FROM budget)
    FOR UPDATE SKIP LOCKED
    ), claimants AS (
      SELECT c.ord AS claimant, (c.item->>'n')::integer AS n, (c.item->>'lease_ms')::integer AS lease_ms,
             c.item->>'worker_id' AS worker_id, sum((c.item->>'n')::integer) OVER (ORDER BY c.ord) AS upto
      FROM json_array_elements($5::json) WITH ORDINALITY AS c(item, ord)
    ), assigned AS (
      SELECT p.id, p.slot, cl.claimant, coalesce(cl.lease_ms, st.lease_ms) AS lease_ms, cl.worker_id,
             st.timeout_ms, clock_timestamp() AS at
      FROM (SELECT id, slot, row_number() OVER (ORDER BY "picked".priority DESC, "picked".run_at ASC, "picked".id ASC) AS rn FROM picked) p
      JOIN claimants cl ON p.rn > cl.upto - cl.n AND p.rn <= cl.upto
      CROSS JOIN settings st
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
    ), recorded AS (
    INSERT INTO baton.flow_state AS f (queue, is_queue, group_key, claim_times, claim_counts)
    SELECT $6, w.is_queue, '', r.new_times, r.new_counts
    FROM budget b
    CROSS JOIN (SELECT count(*)::integer AS n, max(claimed_at) AS at FROM claimed) t
    CROSS JOIN LATERAL (VALUES (true, b.rate_period_ms, b.claim_times, b.claim_counts),
                               (false, b.blank_rate_period_ms, b.blank_claim_times, b.blank_claim_counts))
      AS w(is_queue, period_ms, times, counts)
    CROSS JOIN LATERAL baton.rate_recorded(w.times, w.counts, w.period_ms, t.at, t.n) r
    WHERE t.n > 0 AND w.period_ms IS NOT NULL
    ON CONFLICT (queue, is_queue, group_key) DO UPDATE SET
      claim_times = excluded.claim_times, claim_counts = excluded.claim_counts)
    SELECT c.claimant AS claimant, c.id AS id, c.queue AS queue, c.group_key AS group_key,
           c.payload_json AS payload_json, c.priority AS priority, c.attempts AS attempts,
           c.max_attempts AS max_attempts, c.lease_token AS lease_token,
           c.lease_expires_at AS lease_expires_at, c.deadline_at AS deadline_at, c.claimed_at AS claimed_at,
           c.run_at AS run_at, c.created_at AS created_at, c.meta AS meta, NULL::text AS signal
    FROM claimed c
    UNION ALL
    SELECT NULL::bigint AS claimant, NULL::bigint AS id, NULL::text AS queue, NULL::text AS group_key,
           NULL::text AS payload_json, NULL::integer AS priority, NULL::integer AS attempts,
           NULL::integer AS max_attempts, NULL::uuid AS lease_token, NULL::timestamptz AS lease_expires_at,
           NULL::timestamptz AS deadline_at, NULL::timestamptz AS claimed_at, NULL::timestamptz AS run_at,
           NULL::timestamptz AS created_at, s.meta AS meta, s.signal AS signal
    FROM (SELECT (SELECT CASE WHEN walk THEN 'divert'
                                  WHEN NOT flow_controlled THEN 'plain'
                                  WHEN reason IS NOT NULL THEN 'held_back'
                                  WHEN NOT (limited OR overrides) THEN 'grouped' END
                      FROM budget) AS signal, (SELECT jsonb_build_object('reason', reason, 'retry_after_ms', retry_after_ms) FROM budget) AS meta FROM settings) s
    WHERE s.signal IS NOT NULL;
