-- The flow claim's transaction, 2: the groups with ready jobs, after the group served last.
-- The statement as the server sends it, recorded with the sample values below by
-- test/jobs/sql-files.test.ts; `npm run sql` rewrites this file (claim-flow-walk.sql).
-- $1 = false
-- $2 = 'q-flow-walk'
-- $3 = 'b'
-- $4 = false
-- $5 = 'b'
-- $6 = false
-- $7 = 'q-flow-walk'
-- $8 = 'b'
-- $9 = 'q-flow-walk'
-- $10 = 'b'
-- $11 = 'q-flow-walk'
-- $12 = 'b'
-- $13 = 2
-- $14 = 'q-flow-walk'
-- $15 = 'q-flow-walk'
-- $16 = null
-- $17 = null
-- $18 = '2025-01-01T12:00:00.000Z'
-- $19 = 'q-flow-walk'
-- $20 = 2
-- $21 = 12
-- $22 = 2
-- $23 = 'q-flow-walk'

    WITH RECURSIVE walk(n, g, wrapped) AS (
      SELECT 1, f.g, f.wrapped FROM (
    SELECT x.g, x.wrapped FROM (
      (SELECT j.group_key AS g, $1::boolean AS wrapped FROM baton.jobs j
       WHERE j.queue = $2 AND j.state = 'ready'
         AND j.group_key > $3::text
         AND j.group_key <= CASE WHEN $4::boolean THEN $5::text ELSE E'\x7f' END
       ORDER BY j.group_key LIMIT 1)
      UNION ALL
      (SELECT j.group_key, true FROM baton.jobs j
       WHERE NOT $6::boolean AND j.queue = $7 AND j.state = 'ready' AND j.group_key <= $8::text
       ORDER BY j.group_key LIMIT 1)
    ) x LIMIT 1) f
      UNION ALL
      SELECT w.n + 1, f.g, f.wrapped FROM walk w CROSS JOIN LATERAL (
    SELECT x.g, x.wrapped FROM (
      (SELECT j.group_key AS g, w.wrapped AS wrapped FROM baton.jobs j
       WHERE j.queue = $9 AND j.state = 'ready'
         AND j.group_key > w.g
         AND j.group_key <= CASE WHEN w.wrapped THEN $10::text ELSE E'\x7f' END
       ORDER BY j.group_key LIMIT 1)
      UNION ALL
      (SELECT j.group_key, true FROM baton.jobs j
       WHERE NOT w.wrapped AND j.queue = $11 AND j.state = 'ready' AND j.group_key <= $12::text
       ORDER BY j.group_key LIMIT 1)
    ) x LIMIT 1) f
      WHERE w.n < 10
    )
    SELECT w.g AS group_key, coalesce(o.paused, false) AS paused,
           coalesce(o.concurrency_limit, $13::integer) AS concurrency_limit,
           rl.period_ms AS rate_period_ms, coalesce(o.weight, 1) AS weight, c.in_flight, r.ready,
           rr.room AS rate_room, rr.retry_after_ms AS rate_retry_after_ms, w.wrapped
    FROM walk w
    LEFT JOIN baton.queue_groups o ON o.queue = $14 AND o.group_key = w.g
    LEFT JOIN baton.flow_state fs ON fs.queue = $15 AND NOT fs.is_queue AND fs.group_key = w.g
    CROSS JOIN LATERAL (
      SELECT coalesce(o.rate_limit, $16::integer) AS lim,
             coalesce(o.rate_period_ms, $17::integer) AS period_ms
    ) rl
    CROSS JOIN LATERAL baton.rate_room(fs.claim_times, fs.claim_counts, rl.lim, rl.period_ms, $18::timestamptz) rr
    CROSS JOIN LATERAL (
      SELECT count(*)::int AS in_flight FROM (
        SELECT 1 FROM baton.jobs c WHERE c.queue = $19 AND c.group_key = w.g AND c.state = 'claimed'
        LIMIT CASE WHEN coalesce(o.concurrency_limit, $20::integer) >= $21::integer
                   THEN 0 ELSE coalesce(o.concurrency_limit, $22::integer, 0) END) x
    ) c
    CROSS JOIN LATERAL (
      SELECT count(*)::int AS ready FROM (
        SELECT 1 FROM baton.jobs r WHERE r.queue = $23 AND r.group_key = w.g AND r.state = 'ready'
        LIMIT 10) x
    ) r
    ORDER BY w.n;
