-- The flow claim's transaction, 1: the queue's lock and budget (baton.flow_budget).
-- The statement as the server sends it, recorded with the sample values below by
-- test/jobs/sql-files.test.ts; `npm run sql` rewrites this file (claim-flow-budget.sql).
-- $1 = 'q-flow-budget'
-- $2 = 15
SELECT b.* FROM baton.flow_budget($1, $2::integer) b;
