-- Claimed jobs given back, as if never claimed (the client of a long-poll went away).
-- The statement as the server sends it, recorded with the sample values below by
-- test/jobs/sql-files.test.ts; `npm run sql` rewrites this file (claim-release.sql).
-- $1 = ["4097"]
-- $2 = ["3f0e9a52-6a43-4a0c-9d4e-52d1b6e0c001"]

        UPDATE baton.jobs j SET state = 'ready', attempts = j.attempts - 1, lease_token = NULL, lease_ms = NULL, lease_expires_at = NULL, deadline_at = NULL,
               claimed_at = NULL, worker_id = NULL
        FROM unnest($1::bigint[], $2::uuid[]) AS r(id, token)
        WHERE j.id = r.id AND j.state = 'claimed' AND j.lease_token = r.token
        RETURNING j.id, j.queue, j.unique_key;
