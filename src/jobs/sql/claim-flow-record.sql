-- The flow claim's transaction, 4: the claim recorded in the rate windows, and the group served last.
-- The statement as the server sends it, recorded with the sample values below by
-- test/jobs/sql-files.test.ts; `npm run sql` rewrites this file (claim-flow-record.sql).
-- $1 = 'q-flow-record'
-- $2 = '[{"is_queue":true,"group_key":"","last_group":"a","period_ms":60000,"n":2}]'
-- $3 = 'q-flow-record'
-- $4 = '2025-01-01T12:00:00.000Z'

    INSERT INTO baton.flow_state AS f (queue, is_queue, group_key, last_group, claim_times, claim_counts)
    SELECT $1, r.is_queue, r.group_key, r.last_group, w.new_times, w.new_counts
    FROM jsonb_to_recordset($2::jsonb)
      AS r(is_queue boolean, group_key text, last_group text, period_ms integer, n integer)
    LEFT JOIN baton.flow_state s ON s.queue = $3 AND s.is_queue = r.is_queue AND s.group_key = r.group_key
    CROSS JOIN LATERAL baton.rate_recorded(s.claim_times, s.claim_counts, r.period_ms, $4::timestamptz, r.n) w
    ON CONFLICT (queue, is_queue, group_key) DO UPDATE SET
      last_group = excluded.last_group, claim_times = excluded.claim_times, claim_counts = excluded.claim_counts;
