-- A batch renew (one renewal is a batch of one), in its ids' one slot.
-- The statement as the server sends it, recorded with the sample values below by
-- test/jobs/sql-files.test.ts; `npm run sql` rewrites this file (renew-own-slot.sql).
-- $1 = ["4097","4100"]
-- $2 = ["3f0e9a52-6a43-4a0c-9d4e-52d1b6e0c001","3f0e9a52-6a43-4a0c-9d4e-52d1b6e0c002"]
-- $3 = ["4097","4100"]
-- $4 = [null,"q"]
-- $5 = ["4097","4100"]
-- $6 = [60000,null]
-- $7 = ["4097","4100"]
-- $8 = [60000,null]
-- $9 = ["4097","4100"]

    WITH locked AS (
      SELECT j.slot, j.id FROM baton.jobs j
      WHERE j.id = ANY($1::bigint[]) AND "j".slot = 1
        AND "j".lease_token = ($2::uuid[])[array_position($3::bigint[], j.id)] AND "j".queue = coalesce(($4::text[])[array_position($5::bigint[], j.id)], "j".queue)
        AND (j.deadline_at IS NULL OR j.deadline_at > clock_timestamp())
      ORDER BY j.id
      FOR UPDATE OF j
    )
    UPDATE baton.jobs j SET
      lease_ms = coalesce(($6::integer[])[array_position($7::bigint[], j.id)], j.lease_ms),
      lease_expires_at = least(clock_timestamp() + coalesce(($8::integer[])[array_position($9::bigint[], j.id)], j.lease_ms) * interval '1 millisecond',
                               j.deadline_at)
    FROM locked l
    WHERE j.id = l.id AND j.slot = l.slot
    RETURNING j.id::text AS id, j.queue, j.lease_expires_at, j.lease_ms;
