import { type Kysely, sql } from 'kysely';

/**
 * Indexes for the operator's lists across queues (GET /v1/jobs, src/jobs/search.ts): every dead job
 * newest first, and every live job that has failed at least once (it is waiting for a retry, or
 * running one).
 *
 * - Dead jobs by (finished_at, id) on the dead class of history only (baton.job_history_dead, migration
 *   0014): only a job that dies pays the entry; an ack of a completed job writes into
 *   baton.job_history_done, which does not have it. The day partitions the leader creates and
 *   attaches take it too.
 * - Live jobs whose `last_error` is set, partial, in the ring and among the scheduled jobs: a job that
 *   has never failed is in neither index (an enqueue only evaluates the predicate), so the index is
 *   as small as the number of jobs retrying, and a claim, renewal or ack, which do not change
 *   `last_error`, keep their heap-only updates.
 *
 * docs/benchmarks.md ("The operator's lists") has what they cost and answer.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`CREATE INDEX job_history_dead_finished_idx ON baton.job_history_dead (finished_at, id)`.execute(
    db,
  );
  await sql`CREATE INDEX jobs_failing_idx ON baton.jobs (id) WHERE last_error IS NOT NULL`.execute(db);
  await sql`CREATE INDEX scheduled_jobs_failing_idx ON baton.scheduled_jobs (id) WHERE last_error IS NOT NULL`.execute(
    db,
  );
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`DROP INDEX IF EXISTS baton.scheduled_jobs_failing_idx`.execute(db);
  await sql`DROP INDEX IF EXISTS baton.jobs_failing_idx`.execute(db);
  await sql`DROP INDEX IF EXISTS baton.job_history_dead_finished_idx`.execute(db);
}
