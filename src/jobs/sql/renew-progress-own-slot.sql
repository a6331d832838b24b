-- A batch renew in which some item carries progress (renew's `progress`), in its ids' one slot; an item without it keeps the job's.
-- The statement as the server sends it, recorded with the sample values below by
-- test/jobs/sql-files.test.ts; `npm run sql` rewrites this file (renew-progress-own-slot.sql).
-- $1 = ["4097","4100"]
-- $2 = ["3f0e9a52-6a43-4a0c-9d4e-52d1b6e0c001","3f0e9a52-6a43-4a0c-9d4e-52d1b6e0c002"]
-- $3 = ["4097","4100"]
-- $4 = [null,null]
-- $5 = ["4097","4100"]
-- $6 = ["{\"done\":3,\"of\":4}",null]
-- $7 = ["4097","4100"]
-- $8 = [null,60000]
-- $9 = ["4097","4100"]
-- $10 = [null,60000]
-- $11 = ["4097","4100"]

    WITH locked AS (
      SELECT j.slot, j.id FROM baton.jobs j
      WHERE j.id = ANY($1::bigint[]) AND "j".slot = 1
        AND "j".lease_token = ($2::uuid[])[array_position($3::bigint[], j.id)] AND "j".queue = coalesce(($4::text[])[array_position($5::bigint[], j.id)], "j".queue)
        AND (j.deadline_at IS NULL OR j.deadline_at > clock_timestamp())
      ORDER BY j.id
      FOR UPDATE OF j
    )
    UPDATE baton.jobs j SET
      progress = nullif(coalesce((($6::text[])[array_position($7::bigint[], j.id)])::jsonb, j.progress), 'null'::jsonb),
      lease_ms = coalesce(($8::integer[])[array_position($9::bigint[], j.id)], j.lease_ms),
      lease_expires_at = least(clock_timestamp() + coalesce(($10::integer[])[array_position($11::bigint[], j.id)], j.lease_ms) * interval '1 millisecond',
                               j.deadline_at)
    FROM locked l
    WHERE j.id = l.id AND j.slot = l.slot
    RETURNING j.id::text AS id, j.queue, j.lease_expires_at, j.lease_ms;
