-- The claim of a grouped queue without limits or overrides: the groups in turn.
-- The statement as the server sends it, recorded with the sample values below by
-- test/jobs/sql-files.test.ts; `npm run sql` rewrites this file (claim-grouped.sql).
-- $1 = 30000
-- $2 = 'q-grouped'
-- $3 = 'q-grouped'
-- $4 = 'q-grouped'
-- $5 = 'q-grouped'
-- $6 = 'q-grouped'
-- $7 = '[{"n":10,"lease_ms":60000,"worker_id":"worker-1"},{"n":5,"worker_id":"worker-2"}]'
-- $8 = 'q-grouped'
-- $9 = 'q-grouped'
-- $10 = 'q-grouped'

    WITH RECURSIVE settings AS (
      SELECT coalesce(bool_or("queues"."paused"), false) AS paused,
    coalesce(max("queues"."lease_ms"), $1::integer) AS lease_ms,
    max("queues"."timeout_ms") AS timeout_ms,
    coalesce(bool_or("queues"."grouped" OR ("queues".concurrency_limit IS NOT NULL OR "queues".rate_limit IS NOT NULL
    OR "queues".group_concurrency_limit IS NOT NULL OR "queues".group_rate_limit IS NOT NULL)), false) AS flow, coalesce(bool_or(("queues".concurrency_limit IS NOT NULL OR "queues".rate_limit IS NOT NULL
    OR "queues".group_concurrency_limit IS NOT NULL OR "queues".group_rate_limit IS NOT NULL)), false) AS limited
      FROM baton.queues WHERE name = $2
    ), 
    turn AS (
      SELECT coalesce((SELECT f.last_group || E'\x01' FROM baton.flow_state f
                       WHERE f.queue = $3 AND f.is_queue AND f.group_key = ''), '') COLLATE "C" AS start,
             (SELECT limited FROM settings)
               OR EXISTS (SELECT 1 FROM baton.queue_groups o WHERE o.queue = $4) AS diverted
    ), walk(n, lo, hi, wrapped, have, g, k, slots, ids, priorities, run_ats) AS (
      SELECT 0, t.start, E'\x7f'::text COLLATE "C", false, 0, NULL::text COLLATE "C", 0,
             NULL::smallint[], NULL::bigint[], NULL::integer[], NULL::timestamptz[]
      FROM turn t CROSS JOIN settings st WHERE NOT t.diverted AND NOT st.paused
      UNION ALL
      SELECT w.n + 1, CASE WHEN s.g IS NULL THEN '' ELSE s.g || E'\x01' END, CASE WHEN s.g IS NULL THEN t.start ELSE w.hi END,
             w.wrapped OR s.g IS NULL, w.have + s.k, s.g, s.k, s.slots, s.ids, s.priorities, s.run_ats
      FROM walk w CROSS JOIN turn t CROSS JOIN LATERAL (
        -- The next group's first jobs: one Merge Append over the partitions, read up to a quantum,
        -- kept while they belong to the first group read (in claim order, as read).
        SELECT min(x.group_key) AS g, count(*)::int AS k, array_agg(x.slot) AS slots, array_agg(x.id) AS ids,
               array_agg(x.priority) AS priorities, array_agg(x.run_at) AS run_ats
        FROM (
          SELECT p.*, first_value(p.group_key) OVER () AS first FROM (
    SELECT j.group_key, j.slot, j.id, j.priority, j.run_at FROM baton.jobs j
    WHERE j.queue = $5 AND j.state = 'ready' AND ("j".expires_at IS NULL OR "j".expires_at > now()) AND j.group_key >= w.lo AND j.group_key < w.hi
    ORDER BY j.group_key, "j".priority DESC, "j".run_at ASC, "j".id ASC
    LIMIT 4
    FOR UPDATE SKIP LOCKED) p
        ) x WHERE x.group_key = x.first
      ) s
      WHERE w.have < 15 AND (s.g IS NOT NULL OR (NOT w.wrapped AND t.start > ''))
    ), visited AS (
      SELECT n, g, k, slots, ids, priorities, run_ats, max(have) OVER () AS have FROM walk WHERE g IS NOT NULL
    ), cand AS (
      -- First pass: each visited group's jobs, group by group. Then, when every group was visited and
      -- the claim is still short (few groups), round by round from the groups that gave a full quantum.
      SELECT c.*, row_number() OVER (ORDER BY c.phase, c.a, c.b) AS seq FROM (
        SELECT 1 AS phase, v.n AS a, u.r AS b, v.n, v.g, u.slot, u.id, u.priority, u.run_at
        FROM visited v
        CROSS JOIN LATERAL unnest(v.slots, v.ids, v.priorities, v.run_ats) WITH ORDINALITY AS u(slot, id, priority, run_at, r)
        UNION ALL
        SELECT 2, u.r, v.n, v.n, v.g, u.slot, u.id, u.priority, u.run_at
        FROM visited v CROSS JOIN LATERAL (
          SELECT m.*, row_number() OVER (ORDER BY "m".priority DESC, "m".run_at ASC, "m".id ASC) AS r FROM (
    SELECT j.slot, j.id, j.priority, j.run_at FROM baton.jobs j
    WHERE j.queue = $6 AND j.state = 'ready' AND ("j".expires_at IS NULL OR "j".expires_at > now()) AND j.group_key = v.g
    ORDER BY "j".priority DESC, "j".run_at ASC, "j".id ASC
    OFFSET 4 LIMIT 15 - v.have
    FOR UPDATE SKIP LOCKED) m
        ) u
        WHERE v.have < 15 AND v.k = 4
      ) c
      ORDER BY c.phase, c.a, c.b
      LIMIT 15
    ), picked AS (
      SELECT c.slot, c.id, c.priority, c.run_at FROM cand c
    ), claimants AS (
      SELECT c.ord AS claimant, (c.item->>'n')::integer AS n, (c.item->>'lease_ms')::integer AS lease_ms,
             c.item->>'worker_id' AS worker_id, sum((c.item->>'n')::integer) OVER (ORDER BY c.ord) AS upto
      FROM json_array_elements($7::json) WITH ORDINALITY AS c(item, ord)
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
    ), 
    turn_to AS (
      SELECT CASE WHEN l.phase = 1 AND l.have > 15
                  THEN coalesce((SELECT v.g FROM visited v WHERE v.n < l.n ORDER BY v.n DESC LIMIT 1), l.g)
                  ELSE l.g END AS g
      FROM (SELECT c.phase, c.n, c.g, v.have FROM cand c JOIN visited v ON v.n = c.n ORDER BY c.seq DESC LIMIT 1) l
    ), turn_row AS (
      SELECT f.queue FROM baton.flow_state f WHERE f.queue = $8 AND f.is_queue AND f.group_key = ''
      FOR UPDATE SKIP LOCKED
    ), turned AS (
      UPDATE baton.flow_state f SET last_group = t.g
      FROM turn_row r CROSS JOIN turn_to t
      WHERE f.queue = r.queue AND f.is_queue AND f.group_key = '' AND f.last_group IS DISTINCT FROM t.g
    ), first_turn AS (
      INSERT INTO baton.flow_state (queue, is_queue, group_key, last_group)
      SELECT $9, true, '', t.g FROM turn_to t
      WHERE NOT EXISTS (SELECT 1 FROM baton.flow_state f WHERE f.queue = $10 AND f.is_queue AND f.group_key = '')
      ON CONFLICT DO NOTHING
    )
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
    FROM (SELECT CASE WHEN (SELECT diverted FROM turn) THEN 'divert'
                          WHEN NOT flow THEN 'plain' END AS signal, NULL::jsonb AS meta FROM settings) s
    WHERE s.signal IS NOT NULL;
