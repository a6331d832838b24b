-- The queue of each job of a batch (a batch ack with `next`, auth for a queue-limited key), in its ids' one slot; only ids not found there are looked for in every table.
-- The statement as the server sends it, recorded with the sample values below by
-- test/jobs/sql-files.test.ts; `npm run sql` rewrites this file (queues-of-jobs-own-slot.sql).
-- $1 = ["4097","4100"]

    SELECT j.id, j.queue FROM baton.jobs j WHERE j.id = ANY($1::bigint[]) AND "j".slot = 1;
